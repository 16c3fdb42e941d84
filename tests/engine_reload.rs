//! Config reload at the engine level, on the simulated PMU with a manual
//! clock: the totals of metrics that count the same events continue in
//! the new engine ([`Engine::totals`] / [`Engine::carry_over`]); changed
//! and new metrics start from zero.

use perf_exporter::config::Config;
use perf_exporter::engine::Engine;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::probe::prober;
use perf_exporter::resolve::chain::{resolve_config, Resolution};
use perf_exporter::resolve::Context;
use perf_exporter::snapshot::Snapshot;
use std::path::Path;
use std::sync::Arc;

const SEC: u64 = 1_000_000_000;

fn resolve(k: &SimKernel, t: &PmuTable, yaml: &str) -> Resolution {
    let cfg = Config::parse(yaml, "test.yaml").unwrap();
    let p = prober(k);
    resolve_config(&cfg, t, &Context::default(), Some(&p))
}

fn value(s: &Snapshot, name: &str, cpu: &str) -> Option<f64> {
    s.families
        .iter()
        .find(|f| f.name == name)?
        .samples
        .iter()
        .find(|x| x.labels.iter().any(|(k, v)| *k == "cpu" && v == cpu))
        .map(|x| x.value)
}

const OLD: &str = "sets:
  - name: sw
    events:
      - metric: perf_cpu_clock_seconds_total
        event: cpu-clock
      - metric: perf_context_switches_total
        event: context-switches
      - metric: perf_page_faults_total
        event: page-faults
";

/// cpu-clock unchanged (moved to another set), context-switches now
/// counts a different event, page-faults gone, cpu-migrations new.
const NEW: &str = "sets:
  - name: other
    events:
      - metric: perf_cpu_migrations_total
        event: cpu-migrations
      - metric: perf_cpu_clock_seconds_total
        event: cpu-clock
  - name: sw
    events:
      - metric: perf_context_switches_total
        event: task-clock
";

#[test]
fn unchanged_metrics_continue_changed_ones_restart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-skx");
    let t = PmuTable::discover(&root).unwrap();
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let mut old = Engine::new(k.clone(), t.clone(), resolve(&k, &t, OLD));
    old.collect();
    k.advance(5 * SEC);
    let before = old.collect();
    let clock0 = value(&before, "perf_cpu_clock_seconds_total", "0").unwrap();
    let cs0 = value(&before, "perf_context_switches_total", "0").unwrap();
    assert!((clock0 - 5.0).abs() < 1e-6, "{clock0}");
    let group0 = before
        .families
        .iter()
        .find(|f| f.name == "perf_group_enabled_seconds_total")
        .unwrap()
        .samples
        .iter()
        .find(|x| {
            x.labels.contains(&("set", "sw".into())) && x.labels.contains(&("cpu", "0".into()))
        })
        .unwrap()
        .value;

    let totals = old.totals();
    drop(old);
    let mut new = Engine::new(k.clone(), t.clone(), resolve(&k, &t, NEW));
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
    let group = after
        .families
        .iter()
        .find(|f| f.name == "perf_group_enabled_seconds_total")
        .unwrap()
        .samples
        .iter()
        .find(|x| {
            x.labels.contains(&("set", "sw".into())) && x.labels.contains(&("cpu", "0".into()))
        })
        .unwrap()
        .value;
    assert!(group >= group0 + 2.0 - 1e-6, "{group0} -> {group}");
}
