//! Aggregation per set (`per: cpu | core | socket | node`, issue 29) on the
//! simulated PMU of intel-skx (8 CPUs; cores {0,4} {1,5} {2,6} {3,7} from
//! `topology/core_cpus_list`; sockets 0 = {0,1,4,5} and 1 = {2,3,6,7}):
//! each level sums the per-CPU values of the same collection, the per-CPU
//! detail stays in the engine for the live view and `stat`, and a summed
//! series' state still tells one CPU that never counted from all of them.

use crate::engines::{self, skx_engine as engine, SEC};
use perf_exporter::engine::Engine;
use perf_exporter::export::live::{self, PerCpuDetail};
use perf_exporter::snapshot::Family;
use std::collections::BTreeMap;

const LEVELS: &str = crate::config!("aggregation/levels");

/// A family's samples: rendered labels → value.
fn samples(families: &[Family], name: &str) -> BTreeMap<String, f64> {
    engines::samples(families, name).into_iter().collect()
}

/// A summed series' labels and the CPUs it sums.
type Summed = (&'static str, &'static [u32]);

fn cpu_value(detail: &BTreeMap<String, f64>, cpu: u32) -> f64 {
    detail[&format!("{{cpu=\"{cpu}\"}}")]
}

#[test]
fn each_level_sums_the_per_cpu_values_of_one_collection() {
    let (k, mut e) = engine(LEVELS, |_| ());
    e.collect();
    k.advance(SEC);
    let s = e.collect();
    let detail = e.detail_families();
    // The per-CPU set is exported as it is: no detail of its own.
    assert_eq!(samples(&s.families, "a_cpu_total").len(), 8);
    assert!(samples(&detail, "a_cpu_total").is_empty());
    let want: [(&str, &[Summed]); 3] = [
        (
            "a_core_total",
            &[
                ("{core=\"0\"}", &[0, 4]),
                ("{core=\"1\"}", &[1, 5]),
                ("{core=\"2\"}", &[2, 6]),
                ("{core=\"3\"}", &[3, 7]),
            ],
        ),
        (
            "a_socket_total",
            &[
                ("{socket=\"0\"}", &[0, 1, 4, 5]),
                ("{socket=\"1\"}", &[2, 3, 6, 7]),
            ],
        ),
        ("a_node_total", &[("", &[0, 1, 2, 3, 4, 5, 6, 7])]),
    ];
    for (metric, series) in want {
        let got = samples(&s.families, metric);
        let per_cpu = samples(&detail, metric);
        assert_eq!(per_cpu.len(), 8, "{metric}: {per_cpu:?}");
        assert_eq!(
            got.keys().map(String::as_str).collect::<Vec<_>>(),
            series.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            "{metric}"
        );
        for (labels, cpus) in series {
            let sum: f64 = cpus.iter().map(|&c| cpu_value(&per_cpu, c)).sum();
            assert!(sum > 0.0, "{metric}");
            assert_eq!(got[*labels], sum, "{metric}{labels}: the sum of {cpus:?}");
        }
    }
    // Group times carry the level's label.
    let times = samples(&s.families, "perf_group_enabled_seconds_total");
    for l in [
        "{set=\"bycpu\",cpu=\"7\"}",
        "{set=\"bycore\",core=\"3\"}",
        "{set=\"bysocket\",socket=\"1\"}",
        "{set=\"bynode\"}",
    ] {
        assert!(times.contains_key(l), "{l}: {times:?}");
    }
    assert_eq!(times.len(), 8 + 4 + 2 + 1, "{times:?}");
    // `collect_full` (stat) has the per-CPU series in place of the sums.
    k.advance(SEC);
    let full = e.collect_full();
    for m in [
        "a_cpu_total",
        "a_core_total",
        "a_socket_total",
        "a_node_total",
    ] {
        let f = samples(&full.families, m);
        assert_eq!(f.len(), 8, "{m}: {f:?}");
        assert!(f.keys().all(|l| l.starts_with("{cpu=")), "{m}: {f:?}");
    }
}

/// The live view's per-CPU columns come from the detail, so a set summed
/// over the node still has a column per CPU (and the same total).
#[test]
fn the_live_view_keeps_per_cpu_columns_of_summed_sets() {
    let (k, mut e) = engine(LEVELS, |_| ());
    let full = |e: &mut Engine| {
        let s = e.collect();
        perf_exporter::snapshot::full_resolution(s.families, e.detail_families())
    };
    let a = full(&mut e);
    k.advance(SEC);
    let b = full(&mut e);
    let mut framer = live::Framer::default();
    let f = framer.frame(
        &a,
        &b,
        1.0,
        &live::Reasons::default(),
        PerCpuDetail::All,
        &Default::default(),
    );
    let p = f.per_cpu.clone().expect("per-CPU detail");
    assert_eq!(p.cpus, (0..8).collect::<Vec<u32>>());
    let counts: BTreeMap<&str, &[Option<f64>]> = p.counts().collect();
    let node = counts.get("a_node_total").expect("a_node_total per CPU");
    assert_eq!(node.len(), 8);
    assert!(node.iter().all(|v| v.is_some_and(|v| v > 0.0)), "{node:?}");
    let total: f64 = node.iter().flatten().sum();
    assert!((f.counts["a_node_total"] - total).abs() < 1.0, "{f:?}");
}

/// One CPU whose counters never ran: the node series is `never_ran` with
/// the running share of 7 CPUs out of 8, and `perf_counter_states` counts
/// CPUs (never_ran 1, counting 7); every CPU never running: never_ran 8,
/// share 0.
#[test]
fn one_cpu_never_counted_is_told_from_all() {
    for (down, ratio) in [(vec![3u32], 7.0 / 8.0), ((0..8).collect(), 0.0)] {
        let (k, mut e) = engine(LEVELS, |k| {
            for &c in &down {
                k.set_cpu_never_runs(c, true);
            }
        });
        e.collect();
        k.advance(SEC);
        let s = e.collect();
        let states = samples(&s.families, "perf_counter_states");
        let n = |state: &str| states[&format!("{{metric=\"a_node_total\",state=\"{state}\"}}")];
        assert_eq!(n("never_ran"), down.len() as f64, "{states:?}");
        assert_eq!(n("counting"), (8 - down.len()) as f64, "{states:?}");
        let state = samples(&s.families, "perf_counter_state");
        assert_eq!(
            state.get("{metric=\"a_node_total\",state=\"never_ran\"}"),
            Some(&1.0),
            "{state:?}"
        );
        let r = samples(&s.families, "perf_counter_running_ratio");
        assert_eq!(r.get("{metric=\"a_node_total\"}"), Some(&ratio), "{r:?}");
        // The per-CPU series that never ran has no value; the others do.
        let detail = samples(&e.detail_families(), "a_node_total");
        assert_eq!(detail.len(), 8 - down.len(), "{detail:?}");
    }
}
