//! The engine on the simulated PMU, with a manual clock so every number is
//! exact: multiplexing scaling, monotonic counters under a decreasing
//! estimate, uncore and hybrid placement, hotplug, refusals, groups that
//! never run.

use perf_exporter::config::Config;
use perf_exporter::engine::Engine;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::probe::prober;
use perf_exporter::resolve::chain::resolve_config;
use perf_exporter::resolve::Context;
use perf_exporter::snapshot::{Kind, Snapshot};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const SEC: u64 = 1_000_000_000;

fn table(name: &str) -> PmuTable {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name);
    PmuTable::discover(&root).unwrap()
}

/// The kernel, the engine, and how many opens were the resolver's probes
/// (the engine's own opens come after them).
fn engine(
    fixture: &str,
    yaml: Option<&str>,
    setup: impl FnOnce(&SimKernel),
) -> (Arc<SimKernel>, Engine) {
    let (k, e, _) = engine_probed(fixture, yaml, setup);
    (k, e)
}

fn engine_probed(
    fixture: &str,
    yaml: Option<&str>,
    setup: impl FnOnce(&SimKernel),
) -> (Arc<SimKernel>, Engine, usize) {
    let t = table(fixture);
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    setup(&k);
    let cfg = match yaml {
        Some(y) => Config::parse(y, "test.yaml").unwrap(),
        None => Config::default_config(),
    };
    let res = {
        let p = prober(k.as_ref());
        resolve_config(&cfg, &t, &Context::default(), Some(&p))
    };
    let probes = k.opens().len();
    let e = Engine::new(k.clone(), t, res);
    (k, e, probes)
}

/// metric -> labels rendered `k=v,k=v` -> value.
fn values(s: &Snapshot) -> BTreeMap<String, BTreeMap<String, f64>> {
    s.families
        .iter()
        .map(|f| {
            let m = f
                .samples
                .iter()
                .map(|x| {
                    let l = x
                        .labels
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",");
                    (l, x.value)
                })
                .collect();
            (f.name.clone(), m)
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

const CORE: &str = "sets:\n  - name: core\n    events:\n      - metric: c_total\n        event: cycles\n      - metric: i_total\n        event: instructions\n";

#[test]
fn multiplexing_is_scaled() {
    let (k, mut e) = engine("intel-skx", Some(CORE), |k| k.set_mux_ratio("cpu", 0.5));
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    for cpu in 0..8 {
        let l = format!("cpu={cpu}");
        // Raw counts are half the truth; the estimate restores it.
        assert!(close(v["c_total"][&l], 2.0e9), "{}", v["c_total"][&l]);
        assert!(close(v["i_total"][&l], 3.0e9));
        assert!(close(
            v["perf_group_enabled_seconds_total"][&format!("set=core,{l}")],
            1.0
        ));
        assert!(close(
            v["perf_group_running_seconds_total"][&format!("set=core,{l}")],
            0.5
        ));
    }
    let fam = e
        .collect()
        .families
        .into_iter()
        .find(|f| f.name == "c_total")
        .unwrap();
    assert_eq!(fam.kind, Kind::Counter);
    // Raw reads prove the halving really happened in the simulated kernel.
    assert!(k.opens().iter().all(|o| o.1 == 0));
}

#[test]
fn counters_never_decrease_when_the_estimate_does() {
    let (k, mut e) = engine("intel-skx", Some(CORE), |_| {});
    e.collect();
    // Busy while half-scheduled, idle while fully scheduled: the estimate
    // raw * enabled / running first overshoots, then falls.
    k.set_mux_ratio("cpu", 0.5);
    k.set_activity("cpu", 4.0);
    k.advance(SEC);
    let a = values(&e.collect())["c_total"]["cpu=0"];
    assert!(close(a, 8.0e9), "{a}"); // raw 4e9 over running 0.5 s, enabled 1 s
    k.set_mux_ratio("cpu", 1.0);
    k.set_activity("cpu", 0.0);
    k.advance(SEC);
    // Estimate now 4e9 * 2 / 1.5 = 5.33e9 < 8e9: the counter must hold.
    let b = values(&e.collect())["c_total"]["cpu=0"];
    assert_eq!(a, b);
    k.set_activity("cpu", 1.0);
    k.advance(4 * SEC);
    // raw 4e9 + 8e9 = 12e9, enabled 6 s, running 5.5 s: estimate 13.09e9.
    let c = values(&e.collect())["c_total"]["cpu=0"];
    assert!(c > b);
    assert!(close(c, 12.0e9 * 6.0 / 5.5), "{c}");
}

#[test]
fn imc_opened_only_on_cpumask_cpus() {
    let (k, mut e, probes) = engine_probed("intel-skx", None, |_| {});
    let imc: Vec<_> = k.opens()[probes..]
        .iter()
        .filter(|o| o.0.starts_with("uncore_imc"))
        .cloned()
        .collect();
    // cas_count_read + cas_count_write on 6 boxes x cpumask {0,2}.
    assert_eq!(imc.len(), 24);
    assert!(imc.iter().all(|o| o.3 == 0 || o.3 == 2), "{imc:?}");
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    let rd = &v["perf_dram_read_bytes_total"];
    assert_eq!(rd.len(), 12, "{rd:?}");
    for b in 0..6 {
        for socket in [0, 1] {
            let l = format!("pmu=uncore_imc_{b},socket={socket}");
            assert!(close(rd[&l], 1.5e7 * 64.0), "{l}: {}", rd[&l]);
        }
    }
    assert!(!rd.keys().any(|l| l.contains("cpu=")));
    // Energy: once per package, in joules (~20 W in the simulation).
    let en = &v["perf_energy_package_joules_total"];
    assert_eq!(en.len(), 2);
    assert!((en["pmu=power,socket=1"] - 20.0).abs() < 0.01, "{en:?}");
    // A snapshot event is a gauge holding the reading.
    let th = e
        .collect()
        .families
        .into_iter()
        .find(|f| f.name == "perf_cpu_thermal_margin_celsius")
        .unwrap();
    assert_eq!(th.kind, Kind::Gauge);
    assert!(th.samples.iter().all(|s| s.value == 40.0));
    assert_eq!(th.samples.len(), 8);
}

#[test]
fn amd_zen4_umc_per_socket() {
    let (k, mut e, probes) = engine_probed("amd-zen4", None, |_| {});
    let umc: Vec<_> = k.opens()[probes..]
        .iter()
        .filter(|o| o.0.starts_with("amd_umc"))
        .cloned()
        .collect();
    assert_eq!(umc.len(), 48);
    for o in &umc {
        let n: u32 = o.0.trim_start_matches("amd_umc_").parse().unwrap();
        assert_eq!(o.3, if n < 12 { 0 } else { 2 }, "{o:?}");
    }
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert_eq!(v["perf_dram_read_bytes_total"].len(), 24);
    assert!(v["perf_dram_read_bytes_total"].contains_key("pmu=amd_umc_13,socket=1"));
    assert!(!v.contains_key("perf_dram_bytes_total"));
}

#[test]
fn zen3_df_sum_of_eight_channels_multiplexed() {
    let (k, mut e, probes) = engine_probed("amd-zen3", None, |k| k.set_max_group("amd_df", 4));
    let df: Vec<_> = k.opens()[probes..]
        .iter()
        .filter(|o| o.0 == "amd_df")
        .cloned()
        .collect();
    assert_eq!(df.len(), 8);
    assert!(df.iter().all(|o| o.3 == 0));
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    let t = &v["perf_dram_bytes_total"];
    assert_eq!(t.len(), 1, "{t:?}");
    assert!(close(t["pmu=amd_df,socket=0"], 8.0 * 1.0e7 * 64.0), "{t:?}");
}

#[test]
fn hybrid_core_pmus_stay_on_their_cpus_and_groups() {
    let (k, mut e) = engine("intel-hybrid", None, |_| {});
    for o in k.opens() {
        if o.1 == 0 || o.1 == 3 {
            let ext = o.2[0] >> 32;
            match ext {
                4 => assert!(o.3 < 16, "{o:?}"),
                10 => assert!(o.3 >= 16, "{o:?}"),
                _ => panic!("generic event without extended type on hybrid: {o:?}"),
            }
        }
    }
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert_eq!(v["perf_cpu_cycles_total"].len(), 28);
    assert!(close(v["perf_cpu_cycles_total"]["cpu=20"], 2.0e9));
    assert!(close(v["perf_instructions_total"]["cpu=3"], 3.0e9));
    // The free-running IMC counters: two PMUs, on CPU 0, socket 0.
    assert_eq!(v["perf_dram_read_bytes_total"].len(), 2);
}

#[test]
fn hotplug_drops_and_restores_series_without_going_back() {
    let (k, mut e) = engine("intel-skx", Some(CORE), |_| {});
    e.collect();
    k.advance(SEC);
    let before = values(&e.collect())["c_total"]["cpu=3"];
    k.set_online(3, false);
    k.advance(SEC);
    let v = values(&e.collect());
    assert!(!v["c_total"].contains_key("cpu=3"));
    assert_eq!(v["c_total"].len(), 7);
    k.set_online(3, true);
    e.collect();
    k.advance(SEC);
    let after = values(&e.collect())["c_total"]["cpu=3"];
    assert!(after >= before + 1.9e9, "{before} -> {after}");
}

#[test]
fn uncore_cpumask_cpu_offline_moves_nothing_is_lost() {
    // IMC on socket 1 lives on CPU 2; take CPU 2 away: socket 1's series
    // go (no other CPU in the fixture's cpumask), socket 0's stay.
    let (k, mut e) = engine("intel-skx", None, |_| {});
    e.collect();
    k.advance(SEC);
    e.collect();
    k.set_online(2, false);
    k.advance(SEC);
    let v = values(&e.collect());
    let rd = &v["perf_dram_read_bytes_total"];
    assert!(rd.keys().all(|l| l.ends_with("socket=0")), "{rd:?}");
    assert_eq!(rd.len(), 6);
}

#[test]
fn refused_pmu_does_not_drop_the_others() {
    let (k, mut e) = engine("intel-skx", None, |k| {
        k.refuse("uncore_imc_3", libc::EACCES)
    });
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    let rd = &v["perf_dram_read_bytes_total"];
    // Box 3 is refused: its series are missing, the other boxes count, and
    // the reason is kept.
    assert_eq!(rd.len(), 10, "{rd:?}");
    assert!(!rd.keys().any(|l| l.contains("uncore_imc_3")));
    let p = e.problems();
    assert!(
        p.iter().any(|(m, r)| m == "perf_dram_read_bytes_total"
            && r.pmu() == Some("uncore_imc_3")
            && r.code() == "privilege"),
        "{p:?}"
    );
}

#[test]
fn refused_cpu_pmu_does_not_drop_software() {
    let (k, mut e) = engine("intel-skx", None, |k| {
        k.refuse("cpu", libc::EACCES);
    });
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert!(!v.contains_key("perf_cpu_cycles_total"));
    assert_eq!(v["perf_context_switches_total"].len(), 8);
    let avail = &v["perf_event_available"];
    let cyc = avail
        .iter()
        .find(|(l, _)| l.contains("metric=perf_cpu_cycles_total"))
        .unwrap();
    assert_eq!(*cyc.1, 0.0);
    // Why, as a label from a fixed set: a failure, not another platform.
    let info = &v["perf_event_unavailable_info"];
    assert!(
        info.keys()
            .any(|l| l.contains("metric=perf_cpu_cycles_total")
                && l.contains("reason=privilege")
                && l.contains("class=failed")),
        "{info:?}"
    );
    let reasons = e.problems();
    assert!(
        reasons.iter().any(|(m, r)| m == "perf_cpu_cycles_total"
            && r.is_permission()
            && r.what_to_do().contains("perf_event_paranoid")),
        "{reasons:?}"
    );
}

#[test]
fn never_scheduled_group_is_split_not_zero() {
    let (k, mut e) = engine("intel-skx", Some(CORE), |k| {
        k.set_group_never_runs("cpu", true)
    });
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert!(
        !v.contains_key("c_total"),
        "a group that never ran exports nothing, not zero"
    );
    k.advance(SEC);
    e.collect(); // second never-ran read: split into single-event groups
    k.advance(SEC);
    let v = values(&e.collect());
    assert!(
        close(v["c_total"]["cpu=1"], 2.0e9),
        "{:?}",
        v.get("c_total")
    );
    assert!(close(v["i_total"]["cpu=1"], 3.0e9));
}

#[test]
fn group_size_limit_splits_at_open() {
    // arm_dmc620-style drivers take one hardware event per group; the IMC
    // here takes only one too: every member gets its own group.
    let (k, mut e) = engine("intel-skx", None, |k| {
        for b in 0..6 {
            k.set_max_group(&format!("uncore_imc_{b}"), 1);
        }
    });
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert_eq!(v["perf_dram_write_bytes_total"].len(), 12);
    assert!(close(
        v["perf_dram_write_bytes_total"]["pmu=uncore_imc_5,socket=1"],
        0.5e7 * 64.0
    ));
}

#[test]
fn vm_without_pmu_serves_software_and_msr_only() {
    let (k, mut e) = engine("vm-no-pmu", None, |_| {});
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert!(!v.contains_key("perf_cpu_cycles_total"));
    assert!(!v.contains_key("perf_dram_read_bytes_total"));
    assert_eq!(v["perf_msr_tsc_total"].len(), 2);
    assert!(close(v["perf_cpu_clock_seconds_total"]["cpu=1"], 1.0));
    let avail = &v["perf_event_available"];
    assert_eq!(avail["metric=perf_cpu_cycles_total,event=cycles,pmu="], 0.0);
    assert_eq!(
        avail["metric=perf_msr_tsc_total,event=msr/tsc/,pmu=msr"],
        1.0
    );
}

#[test]
fn per_cpu_false_sums_over_cpus() {
    let y = "sets:\n  - name: sw\n    per_cpu: false\n    events:\n      - metric: cs_total\n        event: context-switches\n";
    let (k, mut e) = engine("intel-skx", Some(y), |_| {});
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert_eq!(v["cs_total"].len(), 1);
    assert!(close(v["cs_total"][""], 8.0 * 2000.0));
}

#[test]
fn one_read_per_group_and_no_online_reads_per_collection() {
    let (k, mut e) = engine("intel-skx", None, |_| {});
    // Per CPU: core, cache, cache_levels, software, msr (5 sets x 8 CPUs);
    // per uncore instance: 6 IMCs and RAPL on the cpumask CPUs 0 and 2.
    assert_eq!(e.open_groups(), 5 * 8 + 6 * 2 + 2);
    e.collect();
    for _ in 0..5 {
        k.advance(SEC);
        let before = k.reads();
        e.collect();
        assert_eq!(k.reads() - before, e.open_groups() as u64);
    }
    // Nothing changed: the online list was never read again.
    assert_eq!(e.online_reads(), 0);
    // A hotplug signal makes the next collection read it, once.
    k.set_online(5, false);
    k.advance(SEC);
    e.collect();
    assert_eq!(e.online_reads(), 1);
    assert_eq!(e.open_groups(), 5 * 7 + 6 * 2 + 2);
    k.advance(SEC);
    e.collect();
    assert_eq!(e.online_reads(), 1);
}

#[test]
fn per_cpu_false_aggregates_gauges_and_group_times() {
    let y = "sets:\n  - name: msr\n    per_cpu: false\n    events:\n      - metric: tsc_total\n        event: msr/tsc/\n      - metric: margin_celsius\n        event: msr/cpu_thermal_margin/\n  - name: sw\n    events:\n      - metric: cs_total\n        event: context-switches\n";
    let (k, mut e) = engine("intel-skx", Some(y), |_| {});
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    // Counters: one series, the sum over the 8 CPUs.
    assert_eq!(v["tsc_total"].len(), 1);
    assert!(
        close(v["tsc_total"][""], 8.0 * 2.5e9),
        "{:?}",
        v["tsc_total"]
    );
    // Gauges: one series, the mean over CPUs (not the sum).
    assert_eq!(v["margin_celsius"], BTreeMap::from([(String::new(), 40.0)]));
    // Group times and read errors: per set for the aggregated set (summed
    // over CPUs), per CPU for the other.
    let en = &v["perf_group_enabled_seconds_total"];
    assert!(close(en["set=msr"], 8.0), "{en:?}");
    assert!(close(en["set=sw,cpu=3"], 1.0), "{en:?}");
    assert_eq!(en.len(), 1 + 8);
    assert_eq!(v["perf_read_errors_total"]["set=msr"], 0.0);
    // A CPU going away keeps the sums monotonic.
    k.set_online(7, false);
    k.advance(SEC);
    let w = values(&e.collect());
    assert!(close(w["tsc_total"][""], 8.0 * 2.5e9 + 7.0 * 2.5e9));
    assert!(close(
        w["perf_group_enabled_seconds_total"]["set=msr"],
        15.0
    ));
    assert!(!w["perf_group_enabled_seconds_total"].contains_key("set=sw,cpu=7"));
}

#[test]
fn offline_and_back_between_collections_reopens_and_keeps_series() {
    let (k, mut e) = engine("intel-skx", Some(CORE), |_| {});
    e.collect();
    k.advance(SEC);
    let before = values(&e.collect())["c_total"]["cpu=3"];
    // Both hotplug events land between two collections: the online list
    // looks unchanged, but the old counters on CPU 3 are dead.
    k.set_online(3, false);
    k.set_online(3, true);
    k.advance(SEC);
    // Its groups stood still while the others moved: they are reopened,
    // and the series stays, never going back.
    let v = values(&e.collect());
    assert_eq!(v["c_total"]["cpu=3"], before);
    k.advance(SEC);
    let v = values(&e.collect());
    assert_eq!(v["c_total"]["cpu=3"], before, "reopened groups start now");
    k.advance(SEC);
    let after = values(&e.collect())["c_total"]["cpu=3"];
    assert!(close(after, before + 2.0e9), "{before} -> {after}");
    assert!(close(values(&e.collect())["c_total"]["cpu=0"], 4.0 * 2.0e9));
}
