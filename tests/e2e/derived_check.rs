//! `check` with a `derived:` section: each derived metric takes the first
//! alternative of its `expr:` whose inputs exist on the host, and says
//! why it rejected the others (text and `--json`), on two fixtures that
//! pick different formulas.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Top-down "retiring" as perf writes it for Ice Lake and later (the
/// perf-metrics events) and for Skylake (retired uop slots over 4 slots
/// per cycle, per thread with SMT); a metric on `#slots`, which no x86
/// host publishes.
const CFG: &str = r#"sets:
  - name: td
    events:
      - metric: slots_total
        event: ["cpu_core/slots/", "cpu/slots/"]
      - metric: retiring_slots_total
        event: ["cpu_core/topdown-retiring/", "cpu/topdown-retiring/"]
      - metric: uops_retired_slots_total
        event: ["cpu/event=0xc2,umask=0x02/"]
      - metric: cycles_total
        event: [cycles]
derived:
  - name: retiring
    expr:
      - retiring_slots_total / slots_total
      - "uops_retired_slots_total / (4 * cycles_total / (2 if #smt_on else 1))"
  - name: per_slot
    expr: "retiring / #slots"
"#;

fn check(fixture: &str, json: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("td.yaml");
    std::fs::write(&cfg, CFG).unwrap();
    let sysfs = root().join("tests/fixtures/sysfs").join(fixture);
    let mut args = vec![
        "check",
        "--simulate",
        "--path.sysfs",
        sysfs.to_str().unwrap(),
        "--config.file",
        cfg.to_str().unwrap(),
    ];
    if json {
        args.push("--json");
    }
    Command::new(env!("CARGO_BIN_EXE_perf-exporter"))
        .args(&args)
        .output()
        .expect("binary runs")
}

/// The `DERIVED` table of the text report, up to its summary line.
fn derived_text(o: &Output) -> String {
    let t = String::from_utf8_lossy(&o.stdout);
    let from = t.find("DERIVED").expect("a DERIVED table");
    let rest = &t[from..];
    let end = rest.find(" derived: ").map_or(rest.len(), |i| {
        i + rest[i..].find('\n').map_or(rest.len() - i, |n| n + 1)
    });
    rest[..end].to_string()
}

#[test]
fn hybrid_takes_the_perf_metrics_formula_and_skx_the_skylake_one() {
    let o = check("intel-hybrid", false);
    assert_eq!(
        derived_text(&o),
        concat!(
            "DERIVED                   STATUS       EXPR\n",
            "retiring                  resolved     retiring_slots_total / slots_total\n",
            "per_slot                  unavailable  - (not on this platform)\n",
            "                            tried retiring / #slots: the literal `#slots` has no value on this host: the core PMU `cpu_core` has no `caps/slots` (only Arm's PMUv3 driver publishes it; perf has no value for it here either)\n",
            "2 derived: 1 resolved, 0 fallback, 1 unavailable\n",
        )
    );
}

#[test]
fn skx_falls_back_to_the_skylake_formula_and_says_why_in_json() {
    let o = check("intel-skx", false);
    assert_eq!(
        derived_text(&o),
        concat!(
            "DERIVED                   STATUS       EXPR\n",
            "retiring                  fallback     uops_retired_slots_total / (4 * cycles_total / (2 if #smt_on else 1))\n",
            "                            tried retiring_slots_total / slots_total: input `retiring_slots_total` (cpu_core/topdown-retiring/): no PMU matches `cpu_core` on this host; did you mean `cpu`?\n",
            "per_slot                  unavailable  - (not on this platform)\n",
            "                            tried retiring / #slots: the literal `#slots` has no value on this host: the core PMU `cpu` has no `caps/slots` (only Arm's PMUv3 driver publishes it; perf has no value for it here either)\n",
            "2 derived: 0 resolved, 1 fallback, 1 unavailable\n",
        )
    );
    let o = check("intel-skx", true);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &v["derived"];
    assert_eq!(d.as_array().unwrap().len(), 2);
    assert_eq!(d[0]["name"], "retiring");
    assert_eq!(d[0]["status"], "fallback");
    assert_eq!(d[0]["class"], Value::Null);
    assert_eq!(
        d[0]["expr"],
        "uops_retired_slots_total / (4 * cycles_total / (2 if #smt_on else 1))"
    );
    assert_eq!(
        d[0]["tried"],
        json!([
            {
                "event": "retiring_slots_total / slots_total",
                "reason": "input `retiring_slots_total` (cpu_core/topdown-retiring/): no PMU matches `cpu_core` on this host; did you mean `cpu`?",
                "problem": "not_on_platform",
                "what_to_do": "nothing on this host: it is expected on other hardware or kernels (`perf-exporter list` shows what this host offers; add an alternative encoding to count it here)"
            },
            {
                "event": "uops_retired_slots_total / (4 * cycles_total / (2 if #smt_on else 1))",
                "reason": "selected",
                "problem": null,
                "what_to_do": null
            }
        ])
    );
    assert_eq!(d[1]["status"], "unavailable");
    assert_eq!(d[1]["class"], "not_on_platform");
    assert_eq!(d[1]["expr"], Value::Null);
    assert_eq!(d[1]["tried"][0]["problem"], "literal_unavailable");
    // `--strict` fails on an unavailable derived metric, naming it.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("td.yaml");
    std::fs::write(
        &cfg,
        "sets:\n  - name: c\n    events:\n      - metric: cycles_total\n        event: cycles\nderived:\n  - name: per_slot\n    expr: \"cycles_total / #slots\"\n",
    )
    .unwrap();
    let sysfs = root().join("tests/fixtures/sysfs/intel-skx");
    let o = Command::new(env!("CARGO_BIN_EXE_perf-exporter"))
        .args(["check", "--strict", "--simulate", "--path.sysfs"])
        .arg(&sysfs)
        .arg("--config.file")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("--strict: 1 of 1 derived metrics unavailable: per_slot"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `stat`'s summary of a one-second run of [`CFG`] on `fixture` (the
/// simulated kernel): its frame as JSON.
fn stat_summary(fixture: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("td.yaml");
    std::fs::write(&cfg, CFG).unwrap();
    let sysfs = root().join("tests/fixtures/sysfs").join(fixture);
    let o = Command::new(env!("CARGO_BIN_EXE_perf-exporter"))
        .args(["--simulate", "--path.sysfs"])
        .arg(&sysfs)
        .arg("--config.file")
        .arg(&cfg)
        .args(["stat", "-I", "500ms", "-d", "1s", "--json"])
        .output()
        .expect("binary runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let last = out.lines().last().expect("stat prints a summary");
    serde_json::from_str::<Value>(last).expect("JSON")["summary"].clone()
}

/// The evaluator that `stat` (and the live view, OTLP) use takes the
/// alternative `check` reports for the host, with the host's `#`
/// literals in it: on Skylake-SP (SMT on, so `#smt_on` is 1) retiring is
/// the uop-slots formula over the same window's counts, on the hybrid
/// the perf-metrics one; `per_slot` reads `#slots`, which neither host
/// gives, and is unavailable with that reason, never a number.
#[test]
fn stat_evaluates_the_alternative_and_the_literals_of_the_host() {
    let skx = stat_summary("intel-skx");
    let c = |s: &Value, m: &str| {
        s["counts"][m]
            .as_f64()
            .unwrap_or_else(|| panic!("no count of {m}: {s:#}"))
    };
    let want = c(&skx, "uops_retired_slots_total") / (4.0 * c(&skx, "cycles_total") / 2.0);
    let got = skx["derived"]["retiring"]
        .as_f64()
        .expect("retiring on skx");
    assert!(
        (got - want).abs() <= 1e-12 * want.abs(),
        "skx retiring {got}, the Skylake formula with #smt_on=1 gives {want}: {skx:#}"
    );
    let hybrid = stat_summary("intel-hybrid");
    let want = c(&hybrid, "retiring_slots_total") / c(&hybrid, "slots_total");
    let got = hybrid["derived"]["retiring"]
        .as_f64()
        .expect("retiring on the hybrid");
    assert!(
        (got - want).abs() <= 1e-12 * want.abs(),
        "hybrid retiring {got}, the perf-metrics formula gives {want}: {hybrid:#}"
    );
    for s in [&skx, &hybrid] {
        assert_eq!(s["derived"].get("per_slot"), None, "{s:#}");
        let why = s["unavailable"]["per_slot"].to_string();
        assert!(
            why.contains("#slots"),
            "per_slot's reason names #slots: {why}"
        );
    }
}

/// node_exporter 1.9's perf collector's software profilers as one set
/// (`tests/configs/five_software.yaml`, which the benchmarks run too): no
/// `derived:` section, and none of the default table's inputs counted but
/// context switches and page faults.
const FIVE_SOFTWARE: &str = include_str!("../configs/five_software.yaml");

/// `check --simulate` on intel-skx with `yaml` as the config file.
fn check_config(yaml: &str, json: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let sysfs = root().join("tests/fixtures/sysfs/intel-skx");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_perf-exporter"));
    cmd.args(["check", "--simulate", "--path.sysfs"])
        .arg(&sysfs)
        .arg("--config.file")
        .arg(&cfg);
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("binary runs")
}

/// Without `derived:`, the default table applies only where the config
/// counts its inputs: `check` shows the two entries that apply and says
/// how many were left out and which (the `--json` report with what each
/// misses), never "resolved" for a value that cannot come.
#[test]
fn the_default_table_leaves_out_what_the_config_does_not_count() {
    let o = check_config(FIVE_SOFTWARE, false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8_lossy(&o.stdout);
    let from = t.find("DERIVED").expect("a DERIVED table");
    let to = t.find("\ncounters:").expect("the counters after it");
    assert_eq!(
        &t[from..=to],
        concat!(
            "DERIVED                      STATUS       EXPR\n",
            "context_switches_per_second  resolved     perf_context_switches_total / duration_time\n",
            "page_faults_per_second       resolved     perf_page_faults_total / duration_time\n",
            "2 derived: 2 resolved, 0 fallback, 0 unavailable\n",
            "48 derived (default table, the config has no `derived:`): 2 apply to this config's metrics, ",
            "46 left out because their inputs are not counted: ipc, busy_ratio, cpus_utilized, ",
            "l1d_miss_ratio, l1i_miss_ratio, llc_miss_ratio, cache_miss_ratio, branch_miss_ratio, ",
            "l1d_generic_read_mpki, llc_generic_read_mpki, l1i_read_mpki, interrupts_per_second, ",
            "softirqs_per_second, total_dispatch_slots, frontend_bound, bad_speculation, ",
            "backend_bound, retiring, frontend_bound_latency, frontend_bound_bandwidth, ",
            "bad_speculation_mispredicts, bad_speculation_pipeline_restarts, backend_bound_memory, ",
            "backend_bound_cpu, retiring_heavy_operations, retiring_light_operations, atom_slots, ",
            "atom_frontend_bound, atom_bad_speculation, atom_backend_bound, atom_retiring, ",
            "atom_frontend_bound_latency, atom_frontend_bound_bandwidth, ",
            "atom_bad_speculation_mispredicts, atom_bad_speculation_pipeline_restarts, ",
            "atom_backend_bound_memory, atom_backend_bound_cpu, atom_base, atom_ms_uops, ",
            "l1d_read_mpki, llc_read_mpki, dram_read_bytes_per_second, dram_write_bytes_per_second, ",
            "smt_contention, retiring_fastpath, retiring_microcode\n",
        )
    );
    let o = check_config(FIVE_SOFTWARE, true);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &v["derived_default"];
    assert_eq!(
        (d["entries"].as_u64(), d["applied"].as_u64()),
        (Some(48), Some(2))
    );
    let left = d["left_out"].as_array().unwrap();
    assert_eq!(left.len(), 46);
    assert_eq!(
        left[0],
        json!({"name": "ipc", "missing": ["perf_instructions_total", "perf_cpu_cycles_total"]})
    );
    // Left out through another derived metric it reads.
    let smt = left.iter().find(|l| l["name"] == "smt_contention").unwrap();
    assert_eq!(
        smt["missing"],
        json!([
            "perf_topdown_smt_contention_slots_total",
            "total_dispatch_slots"
        ])
    );
    assert_eq!(v["derived"].as_array().unwrap().len(), 2);
}

/// `/metrics` of the same config: no derived gauge and no availability
/// sample of one for an entry left out (`perf_derived_total_dispatch_slots`
/// was "available" with no value ever coming).
#[test]
fn the_default_tables_left_out_entries_are_not_on_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("five.yaml");
    std::fs::write(&cfg, FIVE_SOFTWARE).unwrap();
    let cfg = cfg.to_str().unwrap().to_string();
    let p =
        crate::common::simulated_exporter_with("intel-skx", &["--config.file".to_string(), cfg]);
    // Two collections: a derived gauge has a window from the second on.
    let first = p.scrape();
    assert!(first.contains_key("perf_event_available{metric=\"perf_context_switches_total\"}"));
    let s = p.scrape_until(
        std::time::Duration::from_secs(10),
        "a second collection",
        |s| s != &first,
    );
    let derived: Vec<&String> = s
        .keys()
        .filter(|k| k.starts_with("perf_derived_") || k.contains("metric=\"perf_derived_"))
        .collect();
    assert!(derived.is_empty(), "{derived:?}");
}

/// A written `derived:` table is refused at load when an operand names
/// nothing of the config, with the entry, the operand and the closest
/// names.
#[test]
fn a_written_tables_unknown_operand_is_refused_with_the_closest_names() {
    let yaml = format!(
        "{FIVE_SOFTWARE}derived:\n  - name: switches_per_fault\n    expr: perf_context_switches_total / perf_page_fault_total\n  - name: faults\n    expr: perf_page_faults_totl / duration_time\n"
    );
    let o = check_config(&yaml, false);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let err = err.split_once(".yaml:").map_or(&*err, |(_, r)| r);
    // The second `expr:` line after the config's own lines.
    let line = FIVE_SOFTWARE.lines().count() + 3;
    assert_eq!(
        err,
        format!("{line}:41: derived metric `switches_per_fault`: `expr` column 31: unknown operand `perf_page_fault_total`: \
         did you mean `perf_page_faults_total`, `perf_minor_faults_total` or `perf_major_faults_total`?\n")
    );
    // Events the config does not count, named by their spec.
    let yaml = format!("{FIVE_SOFTWARE}derived:\n  - name: ipc\n    expr: instructions / cycles\n");
    let o = check_config(&yaml, false);
    let err = String::from_utf8_lossy(&o.stderr);
    let err = err.split_once(".yaml:").map_or(&*err, |(_, r)| r);
    assert_eq!(
        err,
        format!("{line}:11: derived metric `ipc`: `expr` column 1: unknown operand `instructions`: \
         no metric or derived metric of the config has this name and none of its metrics counts this event \
         (the closest names: `perf_cpu_migrations_total`, `ipc` or `perf_context_switches_total`); \
         an operand is a metric of the config, an event spec one of its metrics counts, another derived metric, \
         or `duration_time`\n")
    );
}
