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
