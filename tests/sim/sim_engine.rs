//! The engine on the simulated PMU, with a manual clock so every number is
//! exact: multiplexing scaling, monotonic counters under a decreasing
//! estimate, uncore and hybrid placement, hotplug (with and without a
//! hotplug signal), start times, refusals, groups that never run.

use crate::engines::{table, SEC};
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::perf::{Counter, EventAttr, GroupReading, Kernel, PerfError};
use perf_exporter::probe::prober;
use perf_exporter::resolve::chain::resolve_config;
use perf_exporter::resolve::Context;
use perf_exporter::snapshot::{Kind, Snapshot};
use perf_exporter::sys::abi::Exclude;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

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
        // The default config with every set per CPU: these tests look at
        // each CPU's series (the default sums per socket and node).
        None => {
            let mut c = Config::default_config();
            for set in &mut c.sets {
                set.per = perf_exporter::config::Per::Cpu;
            }
            c
        }
    };
    let res = {
        let p = prober(k.as_ref());
        resolve_config(&cfg, &t, &Context::default(), Some(&p))
    };
    let probes = k.opens().len();
    let e = Engine::for_config(k.clone(), t, res, Fds::Unbounded);
    (k, e, probes)
}

/// Labels rendered `k=v,k=v`.
fn rendered(labels: &[(&'static str, String)]) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// metric -> labels rendered `k=v,k=v` -> value.
fn values(s: &Snapshot) -> BTreeMap<String, BTreeMap<String, f64>> {
    s.families
        .iter()
        .map(|f| {
            let m = f
                .samples
                .iter()
                .map(|x| (rendered(&x.labels), x.value))
                .collect();
            (f.name.to_string(), m)
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

const CORE: &str = crate::config!("cycles_instructions");

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
    // cas_count_read + cas_count_write on 6 boxes x cpumask {0,2}, and
    // both again for their sum, perf_dram_bytes_total.
    assert_eq!(imc.len(), 48);
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
    assert_eq!(umc.len(), 96, "read, write, and both again for the total");
    for o in &umc {
        let n: u32 = o.0.trim_start_matches("amd_umc_").parse().unwrap();
        assert_eq!(o.3, if n < 12 { 0 } else { 2 }, "{o:?}");
    }
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    assert_eq!(v["perf_dram_read_bytes_total"].len(), 24);
    assert!(v["perf_dram_read_bytes_total"].contains_key("pmu=amd_umc_13,socket=1"));
    // The total is the read and write counts summed into one series per
    // UMC (1.5e7 + 0.5e7 CAS per second in the simulation, x 64 bytes).
    let total = &v["perf_dram_bytes_total"];
    assert_eq!(total.len(), 24);
    let l = "pmu=amd_umc_13,socket=1";
    assert!(
        close(
            total[l],
            v["perf_dram_read_bytes_total"][l] + v["perf_dram_write_bytes_total"][l]
        ),
        "{total:?}"
    );
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
    // Why, as labels from a fixed set: a failure, not another platform.
    assert!(
        cyc.0.contains("reason=privilege") && cyc.0.contains("class=failed"),
        "{cyc:?}"
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

/// Issue 29: a metric counted on every PMU it was resolved for has one
/// `perf_event_available` series (`metric` alone); one counted on some
/// only keeps one per PMU, the 0s explained in their labels.
#[test]
fn availability_is_one_series_per_metric_unless_partly_counted() {
    let dram = |v: &BTreeMap<String, BTreeMap<String, f64>>, family: &str| {
        v[family]
            .iter()
            .filter(|(l, _)| {
                l.starts_with("metric=perf_dram_read_bytes_total,")
                    || *l == "metric=perf_dram_read_bytes_total"
            })
            .map(|(l, x)| (l.clone(), *x))
            .collect::<Vec<_>>()
    };
    let (k, mut e) = engine("intel-skx", None, |_| {});
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    let avail = &v["perf_event_available"];
    assert_eq!(avail["metric=perf_cpu_cycles_total"], 1.0);
    assert_eq!(
        dram(&v, "perf_event_available"),
        [("metric=perf_dram_read_bytes_total".into(), 1.0)]
    );

    // Resolved on every memory controller, one of which then refuses to
    // open.
    let t = table("intel-skx");
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let res = resolve_config(
        &Config::default_config(),
        &t,
        &Context::default(),
        Some(&prober(k.as_ref())),
    );
    k.refuse("uncore_imc_1", libc::EBUSY);
    let mut e = Engine::for_config(k.clone(), t, res, Fds::Unbounded);
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    let got = dram(&v, "perf_event_available");
    assert_eq!(got.len(), 6, "{got:?}");
    for (l, x) in &got {
        let refused = l.contains("pmu=uncore_imc_1,");
        assert_eq!(*x, if refused { 0.0 } else { 1.0 }, "{l}");
        assert_eq!(l.contains("reason=busy"), refused, "{l}");
    }
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
    assert_eq!(
        avail["metric=perf_cpu_cycles_total,event=cycles,reason=needs_hardware_pmu,class=not_on_platform"],
        0.0
    );
    assert_eq!(avail["metric=perf_msr_tsc_total"], 1.0);
    // Issue 29: one availability series per metric in all (not one more
    // per unavailable metric), each 0 saying why.
    let metrics = Config::default_config()
        .sets
        .iter()
        .map(|s| s.events.len())
        .sum::<usize>();
    let availability: usize = ["perf_event_available", "perf_event_unavailable_info"]
        .iter()
        .filter_map(|f| v.get(*f))
        .map(BTreeMap::len)
        .sum();
    assert_eq!(availability, metrics, "{avail:?}");
    assert!(avail
        .iter()
        .filter(|(_, x)| **x == 0.0)
        .all(|(l, _)| l.contains(",reason=") && l.contains(",class=")));
}

#[test]
fn per_node_sums_over_cpus() {
    let y = crate::config!("sim_engine/per_node_sw");
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
    // Per CPU: core, cache, cache_levels, icache, software, msr (6 sets x 8
    // CPUs; the interrupts set's tracepoints need a tracefs, which this
    // context has not); per uncore instance: 6 IMCs and RAPL on the
    // cpumask CPUs 0 and 2.
    assert_eq!(e.open_groups(), 6 * 8 + 6 * 2 + 2);
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
    assert_eq!(e.open_groups(), 6 * 7 + 6 * 2 + 2);
    // While CPU 5 is known offline, each collection reads it (one small
    // file), so its return is noticed even without a signal.
    k.advance(SEC);
    e.collect();
    assert_eq!(e.online_reads(), 2);
    k.set_online(5, true);
    e.collect();
    assert_eq!(e.online_reads(), 3);
    assert_eq!(e.open_groups(), 6 * 8 + 6 * 2 + 2);
    // Back to none once every CPU is back.
    for _ in 0..3 {
        k.advance(SEC);
        e.collect();
    }
    assert_eq!(e.online_reads(), 3);
}

#[test]
fn per_node_aggregates_gauges_and_group_times() {
    let y = crate::config!("sim_engine/per_node_msr_sw");
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
    // The signal moved but the online list looks unchanged: every group
    // is read one last time and reopened at once, and the series stays,
    // never going back.
    let v = values(&e.collect());
    assert_eq!(v["c_total"]["cpu=3"], before);
    k.advance(SEC);
    let v = values(&e.collect());
    assert!(close(v["c_total"]["cpu=3"], before + 2.0e9), "{v:?}");
    k.advance(SEC);
    let after = values(&e.collect())["c_total"]["cpu=3"];
    assert!(close(after, before + 4.0e9), "{before} -> {after}");
    // The other CPUs lost nothing to the reopening.
    assert!(close(values(&e.collect())["c_total"]["cpu=0"], 4.0 * 2.0e9));
}

const CLOCK: &str = crate::config!("sim_engine/clock");

fn cpu_value(s: &Snapshot, name: &str, cpu: &str) -> Option<f64> {
    values(s).get(name)?.get(&format!("cpu={cpu}")).copied()
}

/// Four offline/online cycles of CPU 1, each applied at once as the
/// signal arrives ([`Engine::on_hotplug`], what the exporter's hotplug
/// thread does): CPU 1's clock counts exactly its online time. The counts
/// since the last collection are read before its groups close, and its
/// groups count again from the moment it is back.
#[test]
fn hotplug_signal_reads_the_last_counts_and_reopens_at_once() {
    let (k, mut e) = engine("intel-skx", Some(CLOCK), |_| {});
    e.collect();
    let mut last = 0.0;
    for _ in 0..4 {
        k.advance(SEC / 2);
        let s = e.collect();
        let v = cpu_value(&s, "clock_seconds_total", "1").expect("cpu1 online");
        assert!(v >= last, "went backwards: {last} -> {v}");
        last = v;
        k.advance(SEC / 4);
        k.set_online(1, false);
        assert!(!e.on_hotplug());
        k.advance(SEC);
        let s = e.collect();
        assert_eq!(cpu_value(&s, "clock_seconds_total", "1"), None);
        k.set_online(1, true);
        assert!(!e.on_hotplug());
        k.advance(SEC / 4);
    }
    let s = e.collect();
    // Online 4 x (0.5 + 0.25 + 0.25) s of the 8 s.
    let cpu1 = cpu_value(&s, "clock_seconds_total", "1").unwrap();
    assert!(close(cpu1, 4.0), "cpu1 counted {cpu1} s of 4 s online");
    assert!(close(
        cpu_value(&s, "clock_seconds_total", "0").unwrap(),
        8.0
    ));
    let en = &values(&s)["perf_group_enabled_seconds_total"];
    assert!(close(en["set=sw,cpu=1"], 4.0), "{en:?}");
}

/// The simulated kernel with two behaviours of the live one: no hotplug
/// signal ever arrives (a container with its own user namespace), and an
/// offline CPU's groups are broken up (the kernel detaches the members, so
/// a read of the leader returns the leader alone).
#[derive(Debug)]
struct Quirks {
    sim: Arc<SimKernel>,
    no_uevents: bool,
    detach_offline: bool,
}

impl Kernel for Quirks {
    fn open(&self, a: &EventAttr, cpu: u32, g: Option<&Counter>) -> Result<Counter, PerfError> {
        self.sim.open(a, cpu, g)
    }
    fn enable_group(&self, l: &Counter, a: &EventAttr, cpu: u32) -> Result<(), PerfError> {
        self.sim.enable_group(l, a, cpu)
    }
    fn read_group(
        &self,
        c: &Counter,
        a: &EventAttr,
        cpu: u32,
        out: &mut GroupReading,
    ) -> Result<(), PerfError> {
        self.sim.read_group(c, a, cpu, out)?;
        let leader = out.values.first().is_some_and(|v| v.0 == c.id);
        if self.detach_offline && leader && !self.sim.online_cpus().contains(&cpu) {
            out.values.truncate(1);
        }
        Ok(())
    }
    fn online_cpus(&self, sysfs: &Path) -> Option<Vec<u32>> {
        Kernel::online_cpus(self.sim.as_ref(), sysfs)
    }
    fn hotplug_generation(&self) -> Option<u64> {
        if self.no_uevents {
            Some(0)
        } else {
            self.sim.hotplug_generation()
        }
    }
    fn simulated(&self) -> bool {
        true
    }
}

/// An engine for `CLOCK` on intel-skx over `Quirks`, and how to make
/// another one over the same kernel (a reload).
type Reopen = Box<dyn Fn() -> Engine>;

fn quirky_engine(no_uevents: bool, detach_offline: bool) -> (Arc<SimKernel>, Engine, Reopen) {
    let t = table("intel-skx");
    let sim = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let cfg = Config::parse(CLOCK, "test.yaml").unwrap();
    let res = {
        let p = prober(sim.as_ref());
        resolve_config(&cfg, &t, &Context::default(), Some(&p))
    };
    let k: Arc<dyn Kernel> = Arc::new(Quirks {
        sim: sim.clone(),
        no_uevents,
        detach_offline,
    });
    let reopen: Reopen = {
        let (k, t, res, sim) = (k.clone(), t.clone(), res.clone(), sim.clone());
        Box::new(move || {
            // A reload discovers the host again: its CPUs online now.
            let mut t = t.clone();
            t.topology.online = sim.online_cpus();
            Engine::for_config(k.clone(), t, res.clone(), Fds::Unbounded)
        })
    };
    (sim, Engine::for_config(k, t, res, Fds::Unbounded), reopen)
}

/// The kernel detaches an offline CPU's group members: the last read
/// reads each of them on its own, so their counts are not lost either.
#[test]
fn last_read_reads_members_detached_from_their_group() {
    let (sim, mut e, _) = quirky_engine(false, true);
    e.collect();
    sim.advance(SEC);
    sim.set_online(1, false);
    e.on_hotplug();
    sim.advance(SEC);
    sim.set_online(1, true);
    e.on_hotplug();
    sim.advance(SEC);
    let s = e.collect();
    // context-switches counts 2000/s in the simulation: 1 s before the
    // offline, 1 s after the return.
    let cs = cpu_value(&s, "cs_total", "1").unwrap();
    assert!(
        close(cs, 4000.0),
        "cs_total{{cpu=\"1\"}} = {cs}, 4000 expected"
    );
    assert!(close(
        cpu_value(&s, "clock_seconds_total", "1").unwrap(),
        2.0
    ));
}

/// Without a hotplug signal: the offline CPU is noticed by its stalled
/// group (its final count kept), and its return within one collection,
/// because the online list is re-read while a CPU is known offline.
#[test]
fn without_a_signal_a_return_is_noticed_within_one_collection() {
    let (sim, mut e, _) = quirky_engine(true, false);
    e.collect();
    sim.advance(SEC);
    sim.set_online(1, false);
    sim.advance(SEC);
    // The first read after the offline still moved (it covers the time
    // before it): the final count, nothing lost.
    let s = e.collect();
    assert_eq!(cpu_value(&s, "clock_seconds_total", "1"), Some(1.0));
    sim.advance(SEC);
    // Now its enabled time stood still while the others moved.
    let s = e.collect();
    assert_eq!(cpu_value(&s, "clock_seconds_total", "1"), None);
    let reads = e.online_reads();
    sim.advance(SEC);
    e.collect();
    assert_eq!(
        e.online_reads(),
        reads + 1,
        "offline known: one read per collection"
    );
    sim.set_online(1, true);
    e.collect();
    sim.advance(SEC);
    let s = e.collect();
    let cpu1 = cpu_value(&s, "clock_seconds_total", "1").expect("cpu1 is back");
    assert!(
        close(cpu1, 2.0),
        "1 s before the offline, 1 s after: {cpu1}"
    );
    let reads = e.online_reads();
    sim.advance(SEC);
    e.collect();
    assert_eq!(e.online_reads(), reads, "every CPU back: no more reads");
}

/// A reload while a CPU is offline, without a hotplug signal: the new
/// engine still watches for the CPU's return (and continues its totals).
#[test]
fn without_a_signal_a_cpu_offline_during_a_reload_is_still_watched() {
    let (sim, mut e, reopen) = quirky_engine(true, false);
    e.collect();
    sim.advance(SEC);
    sim.set_online(1, false);
    // The first read after the offline moves, the second stands still.
    for _ in 0..2 {
        sim.advance(SEC);
        e.collect();
    }
    let totals = e.totals();
    drop(e);
    let mut e = reopen();
    e.carry_over(totals);
    sim.advance(SEC);
    e.collect();
    sim.set_online(1, true);
    e.collect();
    sim.advance(SEC);
    let s = e.collect();
    let cpu1 = cpu_value(&s, "clock_seconds_total", "1").expect("cpu1 is back");
    assert!(close(cpu1, 2.0), "{cpu1}");
}

fn unix_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Start times: (family, labels) -> start_unix_nanos.
fn starts(s: &Snapshot) -> BTreeMap<(String, String), u64> {
    s.families
        .iter()
        .flat_map(|f| {
            f.samples.iter().map(move |x| {
                (
                    (f.name.to_string(), rendered(&x.labels)),
                    x.start_unix_nanos,
                )
            })
        })
        .collect()
}

/// Every counter series starts when its group opened; gauges carry none;
/// a CPU's return continues its series under the same start.
#[test]
fn start_times_are_when_counting_began_and_survive_hotplug() {
    let t0 = unix_nanos();
    let (k, mut e) = engine("intel-skx", Some(CLOCK), |_| {});
    let t1 = unix_nanos();
    e.collect();
    k.advance(SEC);
    let s = e.collect();
    for f in &s.families {
        for x in &f.samples {
            if f.kind == Kind::Gauge {
                assert_eq!(x.start_unix_nanos, 0, "{} {:?}", f.name, x.labels);
            } else {
                assert!(
                    (t0..=t1).contains(&x.start_unix_nanos),
                    "{} {:?}: start {} not within the open {t0}..{t1}",
                    f.name,
                    x.labels,
                    x.start_unix_nanos
                );
            }
        }
    }
    let before = starts(&s);
    k.set_online(1, false);
    e.on_hotplug();
    k.advance(SEC);
    k.set_online(1, true);
    e.on_hotplug();
    k.advance(SEC);
    let after = starts(&e.collect());
    assert_eq!(before, after, "a CPU's return restarted a series");
    assert!(after.contains_key(&("clock_seconds_total".into(), "cpu=1".into())));
}

/// perf's modifiers reach `perf_event_open` as exclude bits, on every
/// form (generic, sysfs, software), and the simulated kernel counts what
/// they keep: its CPUs spend 3/4 of their events in user space, page
/// faults are raised 9/10 in user mode. A PMU that counts every level at
/// once (`PERF_PMU_CAP_NO_EXCLUDE`: the IMC) refuses them, and the metric
/// is reported unavailable with the kernel's EINVAL, never exported as 0.
#[test]
fn modifiers_reach_the_open_as_exclude_bits() {
    const Y: &str = crate::config!("sim_engine/modifiers");
    let (k, mut e, probes) = engine_probed("intel-skx", Some(Y), |_| {});
    e.collect();
    k.advance(SEC);
    let v = values(&e.collect());
    for cpu in 0..8 {
        let l = format!("cpu={cpu}");
        assert!(close(v["instructions_total"][&l], 3.0e9));
        assert!(close(v["instructions_user_total"][&l], 2.25e9));
        assert!(close(v["instructions_kernel_total"][&l], 0.75e9));
        assert!(close(v["faults_user_total"][&l], 900.0));
        assert!(close(v["faults_kernel_total"][&l], 100.0));
    }
    assert!(!v.contains_key("dram_read_user_bytes_total"));
    let (m, p) = e
        .problems()
        .into_iter()
        .find(|(m, _)| m == "dram_read_user_bytes_total")
        .expect("the IMC metric is reported");
    assert_eq!(p.code(), "pmu_refused", "{m}: {p}");
    assert!(p.to_string().contains("errno 22"), "{p}");
    // What the engine opened (after the resolver's probes): the bits
    // perf sets for each modifier.
    let opens = k.opens();
    let ex = k.open_excludes();
    assert_eq!(opens.len(), ex.len());
    let user = Exclude {
        kernel: true,
        hv: true,
        guest: true,
        ..Exclude::default()
    };
    let kernel = Exclude {
        user: true,
        hv: true,
        ..Exclude::default()
    };
    let bits = |type_: u32, config: u64| -> Vec<Exclude> {
        let mut v: Vec<Exclude> = opens[probes..]
            .iter()
            .zip(&ex[probes..])
            .filter(|(o, _)| o.1 == type_ && o.2[0] == config)
            .map(|(_, x)| *x)
            .collect();
        v.sort_by_key(|x| format!("{x:?}"));
        v.dedup();
        v
    };
    // cycles-free config: instructions (generic, type 0) twice, all and
    // user; `cpu/instructions/k` is the raw event 0xc0 on type 4.
    assert_eq!(bits(0, 1), vec![Exclude::default(), user]);
    assert_eq!(bits(4, 0xc0), vec![kernel]);
    assert_eq!(bits(1, 2), {
        let mut w = vec![user, kernel];
        w.sort_by_key(|x| format!("{x:?}"));
        w
    });
    assert!(opens[probes..]
        .iter()
        .all(|o| !o.0.starts_with("uncore_imc")));
}
