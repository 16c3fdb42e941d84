//! Config reload at the engine level, on the simulated PMU with a manual
//! clock: the totals of metrics that count the same events continue in
//! the new engine ([`Engine::totals`] / [`Engine::carry_over`]); changed
//! and new metrics start from zero.

use crate::engines::{engine_on, table, SEC};
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds, Opening};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::snapshot::{Sample, Snapshot};
use std::sync::Arc;

/// An engine counting `yaml` on `t`.
fn open(k: &Arc<SimKernel>, t: &PmuTable, yaml: &str) -> Engine {
    let cfg = Config::parse(yaml, "test.yaml").unwrap();
    Engine::for_config(k.clone(), t.clone(), &cfg, Fds::Unbounded)
}

/// The sample of family `name` on CPU `cpu`.
fn sample<'a>(s: &'a Snapshot, name: &str, cpu: &str) -> Option<&'a Sample> {
    s.families
        .iter()
        .find(|f| f.name == name)?
        .samples
        .iter()
        .find(|x| x.labels.iter().any(|(k, v)| *k == "cpu" && v == cpu))
}

fn value(s: &Snapshot, name: &str, cpu: &str) -> Option<f64> {
    sample(s, name, cpu).map(|x| x.value)
}

const OLD: &str = crate::config!("engine_reload/old");

/// cpu-clock unchanged (moved to another set), context-switches now
/// counts a different event, page-faults gone, cpu-migrations new.
const NEW: &str = crate::config!("engine_reload/new");

/// The intel-skx fixture on a manual clock, with an engine for `yaml`.
fn skx(yaml: &str) -> (Arc<SimKernel>, PmuTable, Engine) {
    let t = table("intel-skx");
    let (k, e) = engine_on(t.clone(), yaml, |_| {});
    (k, t, e)
}

#[test]
fn unchanged_metrics_continue_changed_ones_restart() {
    let (k, t, mut old) = skx(OLD);
    old.collect();
    k.advance(5 * SEC);
    let before = old.collect();
    let clock0 = value(&before, "perf_cpu_clock_seconds_total", "0").unwrap();
    let cs0 = value(&before, "perf_context_switches_total", "0").unwrap();
    assert!((clock0 - 5.0).abs() < 1e-6, "{clock0}");
    let (group0, _) = set_value(&before, "perf_group_enabled_seconds_total", "sw", "0").unwrap();

    let totals = old.totals();
    drop(old);
    let mut new = open(&k, &t, NEW);
    let mut continued = new.carry_over(totals);
    continued.sort();
    assert_eq!(continued, vec!["perf_cpu_clock_seconds_total".to_string()]);

    // Right after the swap, before any new read: the carried total.
    let first = new.collect();
    let clock1 = value(&first, "perf_cpu_clock_seconds_total", "0").unwrap();
    assert!(clock1 >= clock0, "cpu-clock reset: {clock0} -> {clock1}");
    k.advance(2 * SEC);
    let after = new.collect();
    let clock2 = value(&after, "perf_cpu_clock_seconds_total", "0").unwrap();
    assert!(
        (clock2 - (clock0 + 2.0)).abs() < 1e-6,
        "cpu-clock continues: {clock0} + 2 s, got {clock2}"
    );
    // context-switches now counts task-clock: a different quantity, from 0.
    let cs = value(&after, "perf_context_switches_total", "0").unwrap();
    assert!(
        cs < cs0 || cs0 == 0.0,
        "changed metric carried over: {cs0} -> {cs}"
    );
    // Gone and new.
    assert!(value(&after, "perf_page_faults_total", "0").is_none());
    assert!(value(&after, "perf_cpu_migrations_total", "0").is_some());
    // The group self-counter of set `sw` continues by name.
    let (group, _) = set_value(&after, "perf_group_enabled_seconds_total", "sw", "0").unwrap();
    assert!(group >= group0 + 2.0 - 1e-6, "{group0} -> {group}");
}

fn start_of(s: &Snapshot, name: &str, cpu: &str) -> Option<u64> {
    sample(s, name, cpu).map(|x| x.start_unix_nanos)
}

fn set_value(s: &Snapshot, name: &str, set: &str, cpu: &str) -> Option<(f64, u64)> {
    s.families
        .iter()
        .find(|f| f.name == name)?
        .samples
        .iter()
        .find(|x| {
            x.labels.contains(&("set", set.into())) && x.labels.contains(&("cpu", cpu.into()))
        })
        .map(|x| (x.value, x.start_unix_nanos))
}

/// A carried-over counter keeps its start time; a metric whose encoding
/// changed restarts from zero under a new start time; so do the group
/// self-counters of a set, which continue with their start by set name.
#[test]
fn carried_counters_keep_their_start_changed_ones_get_a_new_one() {
    let (k, t, mut old) = skx(OLD);
    old.collect();
    k.advance(SEC);
    let before = old.collect();
    let clock = start_of(&before, "perf_cpu_clock_seconds_total", "0").unwrap();
    let cs = start_of(&before, "perf_context_switches_total", "0").unwrap();
    let (_, group) = set_value(&before, "perf_group_enabled_seconds_total", "sw", "0").unwrap();
    assert!(clock > 0 && cs > 0 && group > 0);
    let totals = old.totals();
    drop(old);
    // The wall clock moves on between the two engines.
    let reload_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    while std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        == reload_at
    {
        std::hint::spin_loop();
    }
    let mut new = open(&k, &t, NEW);
    new.carry_over(totals);
    k.advance(SEC);
    let after = new.collect();
    assert_eq!(
        start_of(&after, "perf_cpu_clock_seconds_total", "0"),
        Some(clock),
        "a carried counter restarted its start time"
    );
    let cs_new = start_of(&after, "perf_context_switches_total", "0").unwrap();
    assert!(
        cs_new > reload_at && cs_new > cs,
        "a restarted counter kept its old start: {cs} -> {cs_new}"
    );
    let (_, group_new) = set_value(&after, "perf_group_enabled_seconds_total", "sw", "0").unwrap();
    assert_eq!(group_new, group, "the set's group times continue");
    let (_, other) = set_value(&after, "perf_group_enabled_seconds_total", "other", "0").unwrap();
    assert!(other > reload_at, "a new set's group times start now");
}

/// Issue 11: the group self-counters of a CPU that is offline during a
/// reload keep their totals for its return, as the metric counters do.
#[test]
fn group_times_of_an_offline_cpu_survive_a_reload() {
    let (k, t, mut old) = skx(OLD);
    old.collect();
    k.advance(2 * SEC);
    let s = old.collect();
    let (en0, start) = set_value(&s, "perf_group_enabled_seconds_total", "sw", "1").unwrap();
    let (run0, _) = set_value(&s, "perf_group_running_seconds_total", "sw", "1").unwrap();
    let clock0 = value(&s, "perf_cpu_clock_seconds_total", "1").unwrap();
    assert!(
        (en0 - 2.0).abs() < 1e-6 && (run0 - 2.0).abs() < 1e-6,
        "{en0} {run0}"
    );
    k.set_online(1, false);
    old.on_hotplug();
    let totals = old.totals();
    drop(old);
    let mut new = open(&k, &t, OLD);
    new.carry_over(totals);
    k.advance(SEC);
    let s = new.collect();
    assert!(set_value(&s, "perf_group_enabled_seconds_total", "sw", "1").is_none());
    k.set_online(1, true);
    new.on_hotplug();
    k.advance(SEC / 2);
    let s = new.collect();
    let (en, start1) = set_value(&s, "perf_group_enabled_seconds_total", "sw", "1").unwrap();
    let (run, _) = set_value(&s, "perf_group_running_seconds_total", "sw", "1").unwrap();
    assert!((en - 2.5).abs() < 1e-6, "enabled reset: {en0} -> {en}");
    assert!((run - 2.5).abs() < 1e-6, "running reset: {run0} -> {run}");
    assert_eq!(start1, start);
    let clock = value(&s, "perf_cpu_clock_seconds_total", "1").unwrap();
    assert!((clock - (clock0 + 0.5)).abs() < 1e-6, "{clock0} -> {clock}");
}

/// Two sets; `faults` is the one a bad reload loses.
const WITH_X: &str = crate::config!("engine_reload/with_x");

/// `WITH_X` with the set `faults` (and its metric) deleted by mistake.
const WITHOUT_X: &str = crate::config!("engine_reload/without_x");

/// A reload from `old` to `yaml` as the app does it: the old engine's
/// totals (with what it holds parked) continue in the new one.
fn reload(k: &Arc<SimKernel>, t: &PmuTable, mut old: Engine, yaml: &str) -> Engine {
    old.collect();
    let totals = old.totals();
    drop(old);
    let mut new = open(k, t, yaml);
    new.carry_over(totals);
    new
}

/// Issue 11 (grace period): config A, then a config without metric X
/// (and its set), then A again: X continues from its old total with its
/// old start time, and so do its set's group times; before, X restarted
/// from zero under a new start. A removed metric that does not come back
/// at the next reload is dropped.
#[test]
fn a_metric_removed_by_a_reload_continues_when_the_next_brings_it_back() {
    let (k, t, mut a) = skx(WITH_X);
    a.collect();
    k.advance(3 * SEC);
    let s = a.collect();
    let clock0 = value(&s, "perf_cpu_clock_seconds_total", "0").unwrap();
    let start0 = start_of(&s, "perf_page_faults_total", "0").unwrap();
    let (en0, gstart0) = set_value(&s, "perf_group_enabled_seconds_total", "faults", "0").unwrap();
    assert!((en0 - 3.0).abs() < 1e-6, "{en0}");

    let mut b = reload(&k, &t, a, WITHOUT_X);
    assert_eq!(b.parked_metrics(), ["perf_page_faults_total"]);
    k.advance(SEC);
    let s = b.collect();
    assert!(value(&s, "perf_page_faults_total", "0").is_none());
    assert!(set_value(&s, "perf_group_enabled_seconds_total", "faults", "0").is_none());

    let mut a2 = reload(&k, &t, b, WITH_X);
    assert!(a2.parked_metrics().is_empty());
    k.advance(SEC);
    let s = a2.collect();
    assert_eq!(
        start_of(&s, "perf_page_faults_total", "0"),
        Some(start0),
        "X came back under a new start time"
    );
    let (en, gstart) = set_value(&s, "perf_group_enabled_seconds_total", "faults", "0").unwrap();
    assert!(
        (en - (en0 + 1.0)).abs() < 1e-6,
        "group time reset: {en0} -> {en}"
    );
    assert_eq!(gstart, gstart0);
    let clock = value(&s, "perf_cpu_clock_seconds_total", "0").unwrap();
    assert!((clock - (clock0 + 2.0)).abs() < 1e-6, "{clock0} -> {clock}");

    // Removed, then removed again by the next reload: dropped, so X
    // restarts when it comes back at last.
    let b = reload(&k, &t, a2, WITHOUT_X);
    let b2 = reload(&k, &t, b, WITHOUT_X);
    assert!(b2.parked_metrics().is_empty());
    let mut a3 = reload(&k, &t, b2, WITH_X);
    k.advance(SEC);
    let s = a3.collect();
    assert!(start_of(&s, "perf_page_faults_total", "0").unwrap() > start0);
    let (en, _) = set_value(&s, "perf_group_enabled_seconds_total", "faults", "0").unwrap();
    assert!((en - 1.0).abs() < 1e-6, "{en}");
}

/// Issue 28 item 11: a reload builds the new engine beside the serving
/// one (outside its lock), its groups opened disabled. The old engine
/// keeps counting while the new one is built; the new one counts from
/// `enable`, after the old one's last read, so no second is counted by
/// both, and the carried total continues exactly.
#[test]
fn an_engine_built_beside_the_serving_one_counts_from_its_enable_only() {
    let (k, t, mut old) = skx(OLD);
    old.collect();
    k.advance(SEC);
    let cfg = Config::parse(NEW, "test.yaml").unwrap();
    let mut new = Engine::for_config(
        k.clone(),
        t.clone(),
        &cfg,
        Opening::disabled(Fds::Unbounded),
    );
    assert!(!new.lacks_fds());
    assert_eq!(new.open_groups(), 0, "nothing counts before enable");
    // Built: the old engine still serves, and counts the build's time.
    k.advance(3 * SEC);
    let last = old.collect();
    let clock0 = value(&last, "perf_cpu_clock_seconds_total", "0").unwrap();
    assert!((clock0 - 4.0).abs() < 1e-6, "{clock0}");
    let totals = old.totals();
    drop(old);
    new.enable();
    assert!(new.open_groups() > 0);
    let continued = new.carry_over(totals);
    assert!(continued.contains(&"perf_cpu_clock_seconds_total".to_string()));
    k.advance(2 * SEC);
    let after = new.collect();
    let clock = value(&after, "perf_cpu_clock_seconds_total", "0").unwrap();
    assert!(
        (clock - (clock0 + 2.0)).abs() < 1e-6,
        "the 3 s of the build counted once: {clock0} + 2 s, got {clock}"
    );
}
