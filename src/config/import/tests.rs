//! The importer's unit tests.

use super::*;

fn files(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
}

const EVENTS: &str = r#"[
  {"EventName": "L1D.REPLACEMENT", "EventCode": "0x51", "UMask": "0x1", "SampleAfterValue": "100003", "BriefDescription": "L1D data line replacements"},
  {"EventName": "INST_RETIRED.ANY", "UMask": "0x1", "BriefDescription": "Instructions retired"},
  {"EventName": "CPU_CLK_UNHALTED.THREAD", "EventCode": "0x3C", "BriefDescription": "Core cycles"},
  {"EventName": "OFFCORE_RESPONSE.X", "EventCode": "0xB7, 0xBB", "UMask": "0x1", "MSRIndex": "0x1a6,0x1a7", "MSRValue": "0x3FBC000001", "CounterMask": "0"},
  {"EventName": "UNC_M_CAS_COUNT.RD", "EventCode": "0x04", "UMask": "0x03", "Unit": "iMC", "PerPkg": "1"},
  {"EventName": "UNC_F_X", "EventCode": "0x01", "Unit": "DFPMC"}
]"#;

#[test]
fn encodings_follow_jevents() {
    let m = r#"[
      {"MetricName": "l1d_mpi", "MetricExpr": "L1D.REPLACEMENT / INST_RETIRED.ANY", "ScaleUnit": "1per_instr"},
      {"MetricName": "off", "MetricExpr": "OFFCORE_RESPONSE.X + UNC_F_X"},
      {"MetricName": "bw", "MetricExpr": "UNC_M_CAS_COUNT.RD * 64 / 1e6 / duration_time", "ScaleUnit": "1MB/s"},
      {"MetricName": "Pct", "MetricExpr": "cpu@L1D.REPLACEMENT\\,cmask\\=1@ / CPU_CLK_UNHALTED.THREAD", "ScaleUnit": "100%", "MetricThreshold": "Pct > 0.5 & l1d_mpi > 1"}
    ]"#;
    let out = import(
        &files(&[("ev.json", EVENTS), ("m.json", m)]),
        &Options::default(),
    )
    .unwrap();
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);
    let y = &out.yaml;
    for want in [
        r#"event: ["cpu/event=0x51,umask=0x1/"]"#,
        r#"event: ["cpu/event=0xc0/"]"#,
        r#"event: ["cpu/event=0xb7,umask=0x1,offcore_rsp=0x3FBC000001/"]"#,
        r#"event: ["uncore_imc_*/event=0x4,umask=0x3/", "uncore_imc/event=0x4,umask=0x3/"]"#,
        r#"event: ["amd_df/event=0x1/"]"#,
        r#"event: ["cpu/event=0x51,umask=0x1,cmask=1/"]"#,
        r#"expr: "perf_l1d_replacement_total / perf_inst_retired_any_total""#,
        // `1MB/s` made bytes per second, constants folded.
        r#"expr: "64 * perf_unc_m_cas_count_rd_total / duration_time""#,
        r#"unit: "per_instr""#,
        r#"unit: "bytes per second""#,
        r#"unit: "ratio""#,
        r#"expr: "perf_cpu_l1d_replacement_cmask_1_total / perf_cpu_clk_unhalted_thread_total""#,
        r#"threshold: "pct > 0.5 & l1d_mpi > 1""#,
    ] {
        assert!(y.contains(want), "missing {want} in\n{y}");
    }
}

#[test]
fn what_cannot_be_taken_is_reported_with_its_reason() {
    let m = r#"[
      {"MetricName": "a", "MetricExpr": "L1D.REPLACEMENT / TSC"},
      {"MetricName": "b", "MetricExpr": "a * 2"},
      {"MetricName": "c", "MetricExpr": "L1D.REPLACEMENT $ 2"},
      {"MetricName": "d", "MetricExpr": "L1D.REPLACEMENT", "MetricThreshold": "d > 1 == 2"},
      {"MetricName": "e", "MetricExpr": "e + 1"}
    ]"#;
    let out = import(
        &files(&[("ev.json", EVENTS), ("m.json", m)]),
        &Options::default(),
    )
    .unwrap();
    let why: Vec<(String, String)> = out
        .skipped
        .iter()
        .map(|s| (s.metric.clone(), s.why.clone()))
        .collect();
    assert_eq!(
        why[0],
        (
            "a".into(),
            "`TSC` is neither an event of the files given nor a metric".into()
        )
    );
    assert_eq!(
        why[1],
        ("b".into(), "it reads `a`, which is not taken".into())
    );
    assert_eq!(why[2].0, "c");
    assert!(
        why[2].1.starts_with("its expression: column 17"),
        "{}",
        why[2].1
    );
    assert_eq!(why[3], ("e".into(), "its expression reads itself".into()));
    assert_eq!(out.taken, 1);
    assert_eq!(out.dropped_thresholds[0].metric, "d");
    assert!(out.yaml.contains("# left out: a: `TSC` is neither"));
}

#[test]
fn general_purpose_counters_bound_a_core_set() {
    let mut ev = String::from("[");
    let mut expr = Vec::new();
    for i in 1..=6 {
        ev += &format!(r#"{{"EventName": "E{i}", "EventCode": "0x{i}0"}},"#);
        expr.push(format!("E{i}"));
    }
    ev += r#"{"EventName": "INST_RETIRED.ANY"}]"#;
    let m = format!(
        r#"[{{"MetricName": "m", "MetricExpr": "({}) / INST_RETIRED.ANY"}}]"#,
        expr.join(" + ")
    );
    let out = import(
        &files(&[("ev.json", &ev), ("m.json", &m)]),
        &Options {
            counters: 4,
            ..Options::default()
        },
    )
    .unwrap();
    let sets: Vec<&str> = out
        .yaml
        .lines()
        .filter(|l| l.starts_with("  - name:"))
        .collect();
    assert_eq!(
        sets,
        [r#"  - name: "m""#, r#"  - name: "m_2""#, r#"  - name: "m""#]
    );
}

#[test]
fn bad_files_are_refused_by_name() {
    let e = import(&files(&[("x.json", "{")]), &Options::default()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("x.json: line 1, column 1: not JSON"),
        "{e}"
    );
    let e = import(&files(&[("x.json", "{}")]), &Options::default()).unwrap_err();
    assert!(matches!(e, ImportError::NotAnArray { .. }));
    let e = import(&files(&[("x.json", EVENTS)]), &Options::default()).unwrap_err();
    assert!(matches!(e, ImportError::NoMetrics));
}

/// A target with an `msr` PMU (`tsc`), six IMC boxes (`cas_count_read`),
/// a core PMU, a C-box without cpumask and two versions of a PMU
/// told apart by `identifier`.
fn target() -> Target {
    let pmu = |name: &str, events: &[&str], identifier: Option<&str>, cpumask: bool, core: bool| {
        TargetPmu {
            name: name.into(),
            events: events.iter().map(|e| (*e).to_string()).collect(),
            identifier: identifier.map(str::to_string),
            cpumask,
            core,
        }
    };
    let mut pmus = vec![
        pmu("cpu", &["cpu-cycles", "slots"], None, false, true),
        pmu("msr", &["tsc", "aperf"], None, false, false),
        pmu("cstate_pkg", &["c6-residency"], None, false, false),
        pmu("arm_cmn_0", &[], Some("0x43c"), true, false),
        pmu("power", &["c6-residency"], None, true, false),
        pmu("uncore_cbox_0", &[], None, false, false),
    ];
    for i in 0..6 {
        pmus.push(pmu(
            &format!("uncore_imc_{i}"),
            &["cas_count_read"],
            None,
            true,
            false,
        ));
    }
    Target { pmus }
}

#[test]
fn a_target_resolves_bare_names_and_honours_compat_and_per_pkg() {
    let ev = r#"[
      {"EventName": "INST_RETIRED.ANY"},
      {"EventName": "UNC_M_CAS_COUNT.RD", "EventCode": "0x04", "UMask": "0x03", "Unit": "iMC", "PerPkg": "1"},
      {"EventName": "PKG_X", "EventCode": "0x01", "Unit": "CBO", "PerPkg": "1"},
      {"EventName": "CMN_A", "EventCode": "0x01", "Unit": "arm_cmn", "Compat": "(434|436|43c|43a).*"},
      {"EventName": "CMN_B", "EventCode": "0x02", "Unit": "arm_cmn", "Compat": "0x4(34|36)"},
      {"EventName": "CMN_B", "EventCode": "0x03", "Unit": "arm_cmn", "Compat": "0x43c"}
    ]"#;
    let m = r#"[
      {"MetricName": "tsc_per_inst", "MetricExpr": "TSC / INST_RETIRED.ANY"},
      {"MetricName": "cas", "MetricExpr": "UNC_M_CAS_COUNT.RD + cas_count_read"},
      {"MetricName": "pkg", "MetricExpr": "PKG_X"},
      {"MetricName": "cmn_a_count", "MetricExpr": "CMN_A"},
      {"MetricName": "cmn_b_count", "MetricExpr": "CMN_B"},
      {"MetricName": "amb", "MetricExpr": "c6\\-residency"},
      {"MetricName": "unknown", "MetricExpr": "NOPE"}
    ]"#;
    let opts = Options {
        target: Some(target()),
        ..Options::default()
    };
    let out = import(&files(&[("ev.json", ev), ("m.json", m)]), &opts).unwrap();
    let y = &out.yaml;
    for want in [
        r#"event: ["msr/tsc/"]"#,
        r#"expr: "perf_tsc_total / perf_inst_retired_any_total""#,
        r#"event: ["uncore_imc_*/cas_count_read/"]"#,
        // Compat `0x43c`: the second CMN_B entry, not the first.
        r#"event: ["arm_cmn/event=0x3/"]"#,
    ] {
        assert!(y.contains(want), "missing {want} in\n{y}");
    }
    let why: Vec<(&str, &str)> = out
        .skipped
        .iter()
        .map(|s| (s.metric.as_str(), s.why.as_str()))
        .collect();
    assert_eq!(
        why,
        [
            ("pkg", "`PKG_X` is counted once per package (PerPkg) but the target's uncore_cbox has no cpumask: opened on every CPU, its count would be summed once per CPU"),
            ("cmn_a_count", "`CMN_A` is for other versions of arm_cmn: its Compat `(434|436|43c|43a).*` matches no identifier of the target's (0x43c)"),
            ("amb", "`c6-residency` is an event of several PMUs of the target (cstate_pkg, power): write `pmu@c6-residency@` in the expression"),
            ("unknown", "`NOPE` is neither an event of the files given nor a metric, nor a sysfs event of the target"),
        ]
    );
    // Without a target, the files alone: TSC is unknown, Compat and
    // PerPkg are not judged.
    let out = import(
        &files(&[("ev.json", ev), ("m.json", m)]),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(out.skipped[0].metric, "tsc_per_inst");
    assert!(out.yaml.contains(r#"event: ["arm_cmn/event=0x2/"]"#));
    assert!(out.yaml.contains("perf_pkg_x_total"));
}

/// The platforms whose perf metric JSON the default config's imported
/// `derived:` entries come from, in the order their alternatives are
/// tried (config/metrics/README.md).
const DEFAULT_SOURCES: [(&str, &str); 7] = [
    (
        "config/metrics/icelakex.json",
        include_str!("../../../config/metrics/icelakex.json"),
    ),
    (
        "config/metrics/alderlake.json",
        include_str!("../../../config/metrics/alderlake.json"),
    ),
    (
        "config/metrics/skylakex.json",
        include_str!("../../../config/metrics/skylakex.json"),
    ),
    (
        "config/metrics/amdzen4.json",
        include_str!("../../../config/metrics/amdzen4.json"),
    ),
    (
        "config/metrics/neoverse-n2.json",
        include_str!("../../../config/metrics/neoverse-n2.json"),
    ),
    (
        "config/metrics/neoverse-v2.json",
        include_str!("../../../config/metrics/neoverse-v2.json"),
    ),
    (
        "config/metrics/neoverse-n2-r0p3.json",
        include_str!("../../../config/metrics/neoverse-n2-r0p3.json"),
    ),
];

#[test]
fn the_default_configs_imported_derived_metrics_are_the_importers_output() {
    let shipped = include_str!("../../../config/default.yaml");
    let sets = crate::config::Config::default_config().sets;
    let m = merged_derived(&files(&DEFAULT_SOURCES), &sets).unwrap();
    assert!(m.skipped.is_empty(), "{:?}", m.skipped);
    let begin = shipped.find(BEGIN).expect("the BEGIN marker");
    let end = shipped.find(END).expect("the END marker") + END.len() + 1;
    let want = format!("{}{}{}", &shipped[..begin], m.yaml, &shipped[end..]);
    if std::env::var_os("UPDATE_DEFAULT").is_some() && shipped != want {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.yaml");
        std::fs::write(path, &want).unwrap();
        return;
    }
    assert!(
        shipped == want,
        "config/default.yaml's imported derived metrics drifted from config/metrics/*.json; run `UPDATE_DEFAULT=1 cargo test --lib config::import`:\n{}",
        m.yaml
    );
}

#[test]
fn merged_metrics_read_the_configs_metrics_and_scales() {
    let sets = crate::config::Config::default_config().sets;
    let m = merged_derived(&files(&DEFAULT_SOURCES), &sets).unwrap();
    for want in [
        // Skylake: UOPS_RETIRED.RETIRE_SLOTS is the topdown set's
        // retiring metric; CPU_CLK_UNHALTED.THREAD its slots over 4, and
        // perf's `4 * CPU_CLK_UNHALTED.THREAD` folds to the slots.
        r#""perf_topdown_retiring_slots_total / perf_topdown_slots_total""#,
        // Zen 4: the same metrics, 6 slots per cycle (`6 * (slots / 6)`
        // folded).
        r#"expr: "perf_topdown_slots_total""#,
        r#"      - "d_ratio(perf_topdown_frontend_bound_slots_total, total_dispatch_slots)""#,
    ] {
        assert!(m.yaml.contains(want), "{want} in\n{}", m.yaml);
    }
    // An event no set counts leaves its metric (and those reading it) out.
    let j = r#"[{"EventName": "X", "EventCode": "0x99"},
      {"MetricName": "a", "MetricExpr": "X / cycles"},
      {"MetricName": "b", "MetricExpr": "2 * a"}]"#;
    let m = merged_derived(&files(&[("x.json", j)]), &sets).unwrap();
    let why: Vec<String> = m
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.metric, s.why))
        .collect();
    assert_eq!(
        why,
        [
            "x.json: a: `perf_x_total` (cpu/event=0x99/) is counted by no set of the config",
            "x.json: b: it reads `a`, which is left out",
        ]
    );
}

#[test]
fn merged_metrics_read_equivalent_events_with_their_factor() {
    // perf's encodings of INST_RETIRED.ANY and UNC_M_CAS_COUNT.RD/WR are
    // counted by the default config as `instructions` and the bytes of
    // `cas_count_read`/`cas_count_write` (64 per CAS);
    // MEM_LOAD_RETIRED.L1_MISS under its own encoding. The constants
    // fold: perf's `* 64 / 1e6` under the importer's MB/s factor is gone.
    let sets = crate::config::Config::default_config().sets;
    let j = r#"[{"EventName": "INST_RETIRED.ANY"},
      {"EventName": "MEM_LOAD_RETIRED.L1_MISS", "EventCode": "0xD1", "UMask": "0x08"},
      {"EventName": "UNC_M_CAS_COUNT.RD", "EventCode": "0x04", "UMask": "0x03", "Unit": "iMC"},
      {"EventName": "UNC_M_CAS_COUNT.WR", "EventCode": "0x04", "UMask": "0x0C", "Unit": "iMC"},
      {"MetricName": "L1MPKI", "MetricExpr": "1000 * MEM_LOAD_RETIRED.L1_MISS / INST_RETIRED.ANY"},
      {"MetricName": "bw", "MetricExpr": "(UNC_M_CAS_COUNT.RD + UNC_M_CAS_COUNT.WR) * 64 / 1e6 / duration_time",
       "ScaleUnit": "1MB/s", "PrometheusRecord": "instance:perf_bw:rate5m"}]"#;
    let m = merged_derived(&files(&[("x.json", j)]), &sets).unwrap();
    assert!(m.skipped.is_empty(), "{:?}", m.skipped);
    let body: Vec<&str> = m.yaml.lines().skip(3).collect();
    assert_eq!(
        body,
        [
            r#"  - name: "l1mpki""#,
            r#"    expr: "1000 * perf_l1d_retired_load_misses_total / perf_instructions_total""#,
            r#"  - name: "bw""#,
            r#"    unit: "bytes per second""#,
            // Folded where the importer takes perf's formula (`* 64 / 1e6`
            // under `1000000 *`); the CAS counts over the bytes stay, as a
            // factor is never distributed over a sum.
            r#"    expr: "64 * ((perf_dram_read_bytes_total / 64) + (perf_dram_write_bytes_total / 64)) / duration_time""#,
            r#"    record: "instance:perf_bw:rate5m""#,
            "  # END imported derived metrics",
        ]
    );
}

/// Arm's CPU_CYCLES (0x11) is counted by three metrics of the default
/// config, each scaled to one core's slots and guarded to its MIDRs: a
/// file without `CountedAs` cannot say which its `cpu_cycles` is, one
/// with it reads the metric it names, and a `CountedAs` naming a metric
/// that does not count the event leaves the formula out, saying so.
#[test]
fn counted_as_picks_one_of_the_metrics_that_count_an_encoding() {
    let sets = crate::config::Config::default_config().sets;
    let file = |counted_as: &str| {
        format!(
            r#"[{{"EventName": "CPU_CYCLES", "EventCode": "0x11"{counted_as}}},
      {{"EventName": "STALL_SLOT_BACKEND", "EventCode": "0x3d"}},
      {{"MetricName": "be", "MetricExpr": "stall_slot_backend / (8 * cpu_cycles)"}}]"#
        )
    };
    let m = merged_derived(&files(&[("x.json", file("").as_str())]), &sets).unwrap();
    assert_eq!(m.skipped.len(), 1, "{:?}", m.skipped);
    assert!(
        m.skipped[0]
            .why
            .contains("is counted by several metrics of the config"),
        "{:?}",
        m.skipped
    );
    let j = file(r#", "CountedAs": "perf_topdown_arm_v2_slots_total""#);
    let m = merged_derived(&files(&[("x.json", j.as_str())]), &sets).unwrap();
    assert!(m.skipped.is_empty(), "{:?}", m.skipped);
    assert!(
        m.yaml.contains(
            r#"expr: "perf_topdown_backend_stall_slots_total / perf_topdown_arm_v2_slots_total""#
        ),
        "{}",
        m.yaml
    );
    let j = file(r#", "CountedAs": "perf_instructions_total""#);
    let m = merged_derived(&files(&[("x.json", j.as_str())]), &sets).unwrap();
    assert_eq!(m.skipped.len(), 1, "{:?}", m.skipped);
    assert!(
        m.skipped[0].why.contains(
            "is not counted by `perf_instructions_total`, the metric its `CountedAs` names"
        ),
        "{:?}",
        m.skipped
    );
}

/// An encoding the config counts only as something close (the generic
/// `L1-dcache-load-misses` is not MEM_LOAD_RETIRED.L1_MISS) is not taken
/// for it: without the set that counts perf's event, the metric is left
/// out, saying which event is missing.
#[test]
fn a_stand_in_is_never_taken_for_perfs_event() {
    let mut sets = crate::config::Config::default_config().sets;
    sets.retain(|s| s.name.value != "cache_retired_loads");
    let j = r#"[{"EventName": "INST_RETIRED.ANY"},
      {"EventName": "MEM_LOAD_RETIRED.L3_MISS", "EventCode": "0xD1", "UMask": "0x20"},
      {"MetricName": "L3MPKI", "MetricExpr": "1000 * MEM_LOAD_RETIRED.L3_MISS / INST_RETIRED.ANY"}]"#;
    let m = merged_derived(&files(&[("x.json", j)]), &sets).unwrap();
    let why: Vec<String> = m
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.metric, s.why))
        .collect();
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(
        why[0].starts_with("x.json: l3mpki: `")
            && why[0].contains("is counted by no set of the config"),
        "{why:?}"
    );
}

#[test]
fn a_formula_reading_a_metric_other_files_give_reads_its_own_files_formula() {
    // `a` is given by both files: `y.json`'s `b` reads its own `a`,
    // inlined; `c` (only `y.json` gives it) stays a reference.
    let sets = crate::config::Config::default_config().sets;
    let x = r#"[{"MetricName": "a", "MetricExpr": "cycles / instructions"}]"#;
    let y = r#"[{"MetricName": "a", "MetricExpr": "instructions / cycles"},
      {"MetricName": "c", "MetricExpr": "2 * cycles"},
      {"MetricName": "b", "MetricExpr": "max(1 - a, 0) + c"}]"#;
    let m = merged_derived(&files(&[("x.json", x), ("y.json", y)]), &sets).unwrap();
    assert!(m.skipped.is_empty(), "{:?}", m.skipped);
    let body: Vec<&str> = m.yaml.lines().skip(3).collect();
    assert_eq!(
        body,
        [
            r#"  - name: "a""#,
            "    expr:",
            r#"      - "perf_cpu_cycles_total / perf_instructions_total""#,
            r#"      - "perf_instructions_total / perf_cpu_cycles_total""#,
            r#"  - name: "c""#,
            r#"    expr: "2 * perf_cpu_cycles_total""#,
            r#"  - name: "b""#,
            r#"    expr: "max(1 - (perf_instructions_total / perf_cpu_cycles_total), 0) + c""#,
            "  # END imported derived metrics",
        ]
    );
}

/// The kernel opens a perf-metrics event (`topdown-*` on a core with
/// `slots`) only in a group whose leader is `slots`
/// (`arch/x86/events/intel/core.c`, `intel_pmu_hw_config`: "The metric
/// events require a slots group leader", else EINVAL). The Alder Lake
/// P-core set the importer writes lists `slots` first, then the metric
/// events, then the rest; packed by metric name, `INT_MISC.UOP_DROPPING`
/// came first and `slots` second.
#[test]
fn a_perf_metrics_set_is_written_with_slots_first() {
    let out = import(
        &files(&[(
            "config/metrics/alderlake.json",
            include_str!("../../../config/metrics/alderlake.json"),
        )]),
        &Options::default(),
    )
    .unwrap();
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);
    // Each set's events, as written.
    let mut sets: Vec<(String, Vec<String>)> = Vec::new();
    for l in out.yaml.lines() {
        if let Some(n) = l.strip_prefix("  - name: ") {
            sets.push((n.trim_matches('"').to_string(), Vec::new()));
        } else if let Some(e) = l.strip_prefix("        event: ") {
            if let Some((_, v)) = sets.last_mut() {
                v.push(e.to_string());
            }
        }
        if l == "derived:" {
            break;
        }
    }
    let core: Vec<&(String, Vec<String>)> = sets
        .iter()
        .filter(|(_, v)| v.iter().any(|e| e.contains("cpu_core/")))
        .collect();
    assert_eq!(core.len(), 1, "{sets:?}");
    let umasks: Vec<&str> = core[0]
        .1
        .iter()
        .map(|e| e.rsplit_once("umask=").map_or(e.as_str(), |(_, u)| u))
        .collect();
    assert_eq!(
        umasks,
        [
            "0x4/\"]", "0x80/\"]", "0x81/\"]", "0x82/\"]", "0x83/\"]", "0x84/\"]", "0x85/\"]",
            "0x86/\"]", "0x87/\"]", "0x10/\"]"
        ],
        "{sets:?}"
    );
    // The E-cores' sets: ordinary counters, sets of their own (cycles,
    // the three level-1 counters and the nine level-2 events, cut to the
    // general-purpose counters).
    let atom: Vec<&(String, Vec<String>)> = sets
        .iter()
        .filter(|(_, v)| v.iter().any(|e| e.contains("cpu_atom/")))
        .collect();
    assert!(atom.len() >= 2, "{sets:?}");
    assert_eq!(
        atom.iter().map(|(_, v)| v.len()).sum::<usize>(),
        13,
        "{sets:?}"
    );
    assert!(
        atom.iter()
            .all(|(_, v)| v.iter().all(|e| e.contains("cpu_atom/"))),
        "{sets:?}"
    );
}

/// `RequiresCpu` (ours) becomes the alternative's long form, which the
/// config loads with its guard compiled; a file without it writes plain
/// alternatives.
#[test]
fn requires_cpu_becomes_the_alternatives_long_form() {
    let sets = crate::config::Config::default_config().sets;
    let x = r#"[{"MetricName": "a", "MetricExpr": "cycles / instructions", "RequiresCpu": "GenuineIntel-.*"}]"#;
    let y = r#"[{"MetricName": "a", "MetricExpr": "d_ratio(cycles, instructions)"}]"#;
    let m = merged_derived(&files(&[("x.json", x), ("y.json", y)]), &sets).unwrap();
    assert!(m.skipped.is_empty(), "{:?}", m.skipped);
    for want in [
        r#"      - expr: "perf_cpu_cycles_total / perf_instructions_total""#,
        r#"        requires_cpu: "GenuineIntel-.*""#,
        r#"      - "d_ratio(perf_cpu_cycles_total, perf_instructions_total)""#,
    ] {
        assert!(m.yaml.contains(want), "{want} in\n{}", m.yaml);
    }
    let body: String = m
        .yaml
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let yaml = format!(
        "sets:\n  - name: c\n    events:\n      - metric: perf_cpu_cycles_total\n        event: [cycles]\n      - metric: perf_instructions_total\n        event: [instructions]\nderived:\n{body}"
    );
    let cfg =
        crate::config::Config::parse(&yaml, "t.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    let d = cfg.derived.get("a").expect("a");
    let guard = d.formula.requires_cpu.as_ref().expect("the guard");
    assert!(guard.matches("GenuineIntel-6-55-4") && !guard.matches("AuthenticAMD-25-11-1"));
    assert!(d.fallbacks[0].requires_cpu.is_none());
}
