//! `perf-exporter metrics import`: perf's own metric JSON (excerpts of
//! the kernel's skylakex files) into a config that `check` accepts on the
//! matching fixture.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The binary, run from the crate's root (so the file names the import
/// writes into its header are the same everywhere).
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_perf-exporter"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("binary runs")
}

/// `check --json --strict` of `cfg` on a sysfs fixture, which must
/// succeed: its JSON.
fn strict_check(fixture: &str, cfg: &Path) -> Value {
    let sysfs = root().join("tests/fixtures/sysfs").join(fixture);
    let o = run(&[
        "check",
        "--json",
        "--strict",
        "--simulate",
        "--path.sysfs",
        sysfs.to_str().unwrap(),
        "--config.file",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The `key` array of a `check --json` report (`metrics`, `derived`),
/// which must hold `n` entries, each resolved.
fn all_resolved<'a>(v: &'a Value, key: &str, n: usize) -> &'a [Value] {
    let all = v[key].as_array().unwrap();
    assert_eq!(all.len(), n, "{key}");
    for e in all {
        assert_eq!(e["status"], "resolved", "{e}");
    }
    all
}

/// `metrics import` of `args`, which must succeed and print the golden
/// `tests/golden/import/<golden>` (`UPDATE_GOLDEN=1` writes it): the
/// config printed.
fn import_is_golden(args: &[&str], golden: &str) -> String {
    let o = run(&[&["metrics", "import"], args].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let yaml = String::from_utf8(o.stdout).expect("UTF-8");
    assert_golden(&yaml, golden);
    yaml
}

/// `yaml` compared with `tests/golden/import/<name>` (`UPDATE_GOLDEN=1`
/// writes it).
fn assert_golden(yaml: &str, name: &str) {
    let golden: PathBuf = root().join("tests/golden/import").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, yaml).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        yaml,
        want,
        "the imported config differs from {}",
        golden.display()
    );
}

/// `metrics import <json> --target <sysfs fixture> [extra] -o <dir>/<fixture>.yaml`,
/// which must take `taken` metrics and leave none out, its output the
/// golden `tests/golden/import/<golden>`: the config file and its text.
fn import_for(
    dir: &Path,
    json: &str,
    fixture: &str,
    extra: &[&str],
    taken: usize,
    golden: &str,
) -> (PathBuf, String) {
    let sysfs = root().join("tests/fixtures/sysfs").join(fixture);
    let cfg = dir.join(format!("{fixture}.yaml"));
    let args = [
        &[
            "metrics",
            "import",
            json,
            "--target",
            sysfs.to_str().unwrap(),
        ][..],
        extra,
        &["-o", cfg.to_str().unwrap()],
    ]
    .concat();
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "wrote {}: {taken} metrics taken, 0 left out\n",
            cfg.display()
        )
    );
    let yaml = std::fs::read_to_string(&cfg).unwrap();
    assert_golden(&yaml, golden);
    (cfg, yaml)
}

/// `check --json` with `args`, which must succeed: its JSON.
fn check_json(args: &[&str]) -> Value {
    let o = run(&[&["check", "--json"][..], args].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The derived entry `name` of a `check --json` report.
fn derived<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["derived"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {v}"))
}

/// The default config on a sysfs fixture (simulated): each `(name, expr)`
/// of `want` is a fallback taking `expr`.
fn default_takes(fixture: &str, want: &[(&str, String)]) {
    let sysfs = root().join("tests/fixtures/sysfs").join(fixture);
    let v = check_json(&["--simulate", "--path.sysfs", sysfs.to_str().unwrap()]);
    for (name, expr) in want {
        let d = derived(&v, name);
        assert_eq!(d["status"], "fallback", "{d}");
        assert_eq!(d["expr"], expr.as_str(), "{d}");
    }
}

const SKX: [&str; 2] = [
    "tests/fixtures/perf-json/skylakex/events.json",
    "tests/fixtures/perf-json/skylakex/skx-metrics.json",
];

#[test]
fn perf_json_becomes_a_config_check_accepts_on_the_matching_fixture() {
    let want = import_is_golden(&SKX, "skylakex.yaml");

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("skx.yaml");
    let o = run(&[
        "metrics",
        "import",
        SKX[0],
        SKX[1],
        "-o",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "wrote {}: 13 metrics taken, 1 left out\n  C6_Core_Residency: `TSC` is neither an event of the files given nor a metric\n",
            cfg.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), want);

    let v = strict_check("intel-skx", &cfg);
    all_resolved(&v, "metrics", 13);
}

#[test]
fn files_that_are_not_perf_json_are_refused_by_name_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[\n  {\"EventName\": 1,\n").unwrap();
    let o = run(&["metrics", "import", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "metrics import: {}: line 3, column 0: not JSON",
            bad.display()
        )),
        "{err}"
    );
    let o = run(&["metrics", "import", SKX[0]]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("no metric (an object with `MetricName` and `MetricExpr`)"));
}

/// With `--target` (the host's sysfs; here the intel-skx fixture) the
/// names the files do not define resolve against the target's events:
/// `TSC` is `msr/tsc/`, so every metric is taken, and `check --strict`
/// accepts the config on that fixture, every derived metric resolved.
#[test]
fn a_target_sysfs_resolves_tsc_and_check_accepts_every_metric() {
    let skx = root().join("tests/fixtures/sysfs/intel-skx");
    let skx = skx.to_str().unwrap();
    let yaml = import_is_golden(&[SKX[0], SKX[1], "--target", skx], "skylakex-target.yaml");
    assert!(yaml.contains("# 14 metrics taken, 0 left out."));
    assert!(yaml.contains(r#"event: ["msr/tsc/"]"#));

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("skx.yaml");
    std::fs::write(&cfg, &yaml).unwrap();
    let v = strict_check("intel-skx", &cfg);
    all_resolved(&v, "metrics", 15);
    let derived = all_resolved(&v, "derived", 14);
    let c6 = derived
        .iter()
        .find(|d| d["name"] == "c6_core_residency")
        .unwrap();
    assert_eq!(
        c6["expr"],
        "perf_cstate_core_c6_residency_total / perf_tsc_total"
    );

    // A target that is not a sysfs tree is refused by name.
    let o = run(&[
        "metrics",
        "import",
        SKX[0],
        SKX[1],
        "--target",
        "/nonexistent",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--target /nonexistent: "));
}

/// A non-Intel sample: the default config's AMD Zen 4 source
/// (config/metrics/amdzen4.json, the kernel's amdzen4 pipeline
/// utilisation levels 1 and 2 and the events they read) imported for the amd-zen4
/// fixture: every metric taken, and `check --strict` resolves every event
/// and every derived metric there, each with the expression written.
#[test]
fn amd_zen4_pipeline_utilisation_imports_and_check_accepts_every_metric() {
    let zen4 = root().join("tests/fixtures/sysfs/amd-zen4");
    let zen4 = zen4.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zen4.yaml");
    let o = run(&[
        "metrics",
        "import",
        "config/metrics/amdzen4.json",
        "--target",
        zen4,
        "-o",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("wrote {}: 14 metrics taken, 0 left out\n", cfg.display())
    );
    let yaml = std::fs::read_to_string(&cfg).unwrap();
    assert_golden(&yaml, "amdzen4-target.yaml");

    let v = strict_check("amd-zen4", &cfg);
    let metrics: Vec<(String, String)> = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["metric"].as_str().unwrap_or("").to_string(),
                m["status"].to_string(),
            )
        })
        .collect();
    let resolved = |names: &[&str]| -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| ((*n).to_string(), "\"resolved\"".to_string()))
            .collect()
    };
    assert_eq!(
        metrics,
        resolved(&[
            "perf_ls_not_halted_cyc_total",
            "perf_de_no_dispatch_per_slot_no_ops_from_frontend_total",
            "perf_de_src_op_disp_all_total",
            "perf_ex_ret_ops_total",
            "perf_de_no_dispatch_per_slot_backend_stalls_total",
            "perf_de_no_dispatch_per_slot_smt_contention_total",
            // Level 2 (PipelineL2).
            "perf_cpu_de_no_dispatch_per_slot_no_ops_from_frontend_cmask_0x6_total",
            "perf_ex_ret_brn_misp_total",
            "perf_resyncs_or_nc_redirects_total",
            "perf_ex_no_retire_load_not_complete_total",
            "perf_ex_no_retire_not_complete_total",
            "perf_ex_ret_ucode_ops_total",
        ])
    );
    let derived: Vec<(String, String, String)> = v["derived"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap_or("").to_string(),
                d["status"].as_str().unwrap_or("").to_string(),
                d["expr"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want = zen4_derived_want();
    assert_eq!(derived, want);
}

/// What `check` shows for the Zen 4 sample's derived metrics on amd-zen4:
/// each resolved, with its expression over the imported metrics.
fn zen4_derived_want() -> Vec<(String, String, String)> {
    [
        ("total_dispatch_slots", "6 * perf_ls_not_halted_cyc_total"),
        (
            "frontend_bound",
            "d_ratio(perf_de_no_dispatch_per_slot_no_ops_from_frontend_total, total_dispatch_slots)",
        ),
        (
            "bad_speculation",
            "d_ratio(perf_de_src_op_disp_all_total - perf_ex_ret_ops_total, total_dispatch_slots)",
        ),
        (
            "backend_bound",
            "d_ratio(perf_de_no_dispatch_per_slot_backend_stalls_total, total_dispatch_slots)",
        ),
        (
            "smt_contention",
            "d_ratio(perf_de_no_dispatch_per_slot_smt_contention_total, total_dispatch_slots)",
        ),
        ("retiring", "d_ratio(perf_ex_ret_ops_total, total_dispatch_slots)"),
        (
            "frontend_bound_latency",
            "d_ratio((6 * perf_cpu_de_no_dispatch_per_slot_no_ops_from_frontend_cmask_0x6_total), total_dispatch_slots)",
        ),
        (
            "frontend_bound_bandwidth",
            "d_ratio(perf_de_no_dispatch_per_slot_no_ops_from_frontend_total - (6 * perf_cpu_de_no_dispatch_per_slot_no_ops_from_frontend_cmask_0x6_total), total_dispatch_slots)",
        ),
        (
            "bad_speculation_mispredicts",
            "d_ratio(bad_speculation * perf_ex_ret_brn_misp_total, perf_ex_ret_brn_misp_total + perf_resyncs_or_nc_redirects_total)",
        ),
        (
            "bad_speculation_pipeline_restarts",
            "d_ratio(bad_speculation * perf_resyncs_or_nc_redirects_total, perf_ex_ret_brn_misp_total + perf_resyncs_or_nc_redirects_total)",
        ),
        (
            "backend_bound_memory",
            "backend_bound * d_ratio(perf_ex_no_retire_load_not_complete_total, perf_ex_no_retire_not_complete_total)",
        ),
        (
            "backend_bound_cpu",
            "backend_bound * (1 - d_ratio(perf_ex_no_retire_load_not_complete_total, perf_ex_no_retire_not_complete_total))",
        ),
        (
            "retiring_fastpath",
            "retiring * (1 - d_ratio(perf_ex_ret_ucode_ops_total, perf_ex_ret_ops_total))",
        ),
        (
            "retiring_microcode",
            "retiring * d_ratio(perf_ex_ret_ucode_ops_total, perf_ex_ret_ops_total)",
        ),
    ]
    .iter()
    .map(|(n, e)| ((*n).to_string(), "resolved".to_string(), (*e).to_string()))
    .collect()
}

/// The Alder Lake / Raptor Lake top-down levels 1 and 2 of the P-cores
/// and of the E-cores (config/metrics/alderlake.json: the
/// kernel's formulas) imported for the intel-hybrid fixture: every metric
/// taken, the P-cores' set written with `slots` first (the kernel opens a
/// perf-metrics event only under a `slots` leader), and `check --strict`,
/// with and without `--simulate`, resolves every event and every derived
/// metric there.
#[test]
fn alder_lake_topdown_imports_and_check_accepts_every_metric() {
    let hybrid = root().join("tests/fixtures/sysfs/intel-hybrid");
    let hybrid = hybrid.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("adl.yaml");
    let o = run(&[
        "metrics",
        "import",
        "config/metrics/alderlake.json",
        "--target",
        hybrid,
        "-o",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("wrote {}: 25 metrics taken, 0 left out\n", cfg.display())
    );
    let yaml = std::fs::read_to_string(&cfg).unwrap();
    assert_golden(&yaml, "alderlake-target.yaml");
    let first = yaml.lines().find(|l| l.contains("cpu_core/")).unwrap_or("");
    assert!(first.contains("umask=0x4/"), "slots first: {yaml}");

    let v = strict_check("intel-hybrid", &cfg);
    all_resolved(&v, "metrics", 23);
    let names: Vec<&str> = all_resolved(&v, "derived", 25)
        .iter()
        .map(|d| d["name"].as_str().unwrap_or(""))
        .collect();
    for n in crate::common::TOPDOWN_L1_L2
        .into_iter()
        .chain([
            "atom_slots",
            "atom_frontend_bound",
            "atom_bad_speculation",
            "atom_backend_bound",
            "atom_retiring",
        ])
        .chain(crate::common::ATOM_L2)
    {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    // Without `--simulate`: what the fixture's sysfs tells.
    let sysfs = root().join("tests/fixtures/sysfs/intel-hybrid");
    let o = run(&[
        "check",
        "--json",
        "--strict",
        "--path.sysfs",
        sysfs.to_str().unwrap(),
        "--config.file",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    all_resolved(&v, "metrics", 23);
    all_resolved(&v, "derived", 25);
}

/// The default config on the intel-hybrid fixture (Raptor Lake): every
/// top-down level-1 share resolves, `bad_speculation` through the
/// imported Alder Lake formula (no other platform's inputs are counted
/// there), its references to the other shares inlined.
#[test]
fn the_default_configs_top_down_shares_resolve_on_intel_hybrid() {
    let sysfs = root().join("tests/fixtures/sysfs/intel-hybrid");
    let procfs = root().join("tests/fixtures/procfs/intel-hybrid");
    let o = run(&[
        "check",
        "--json",
        "--simulate",
        "--path.sysfs",
        sysfs.to_str().unwrap(),
        "--path.procfs",
        procfs.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let derived = v["derived"].as_array().unwrap();
    let find = |n: &str| {
        derived
            .iter()
            .find(|d| d["name"] == n)
            .unwrap_or_else(|| panic!("{n} in {v}"))
    };
    for n in [
        "frontend_bound",
        "backend_bound",
        "retiring",
        "bad_speculation",
    ] {
        assert_ne!(find(n)["status"], "unavailable", "{}", find(n));
    }
    // The E-cores' level 2: perf's `cpu_atom` formulas over the raw
    // Gracemont events the default counts there.
    for n in crate::common::ATOM_L2 {
        assert_eq!(find(n)["status"], "resolved", "{}", find(n));
    }
    let sum = "(perf_topdown_frontend_bound_slots_total + perf_topdown_bad_speculation_slots_total + perf_topdown_retiring_slots_total + perf_topdown_backend_bound_slots_total)";
    assert_eq!(
        find("bad_speculation")["expr"],
        format!(
            "max(1 - ((perf_topdown_frontend_bound_slots_total / {sum} - perf_topdown_uop_dropping_slots_total / perf_topdown_slots_total) + (perf_topdown_backend_bound_slots_total / {sum} + 0*perf_topdown_slots_total) + (perf_topdown_retiring_slots_total / {sum} + 0*perf_topdown_slots_total)), 0)"
        )
    );
}

/// Arm Neoverse N2: perf's level-1 formulas (config/metrics/neoverse-n2.json,
/// from `neoverse-n2-v2/metrics.json` and `sbsa.json`) imported for the
/// arm-neoverse-n2 tree (its core PMU `armv8_pmuv3_0`); `check --strict`
/// accepts every metric and derived entry there. The default config's
/// four shares take the N2 alternative (the fourth) on that fixture,
/// over the `topdown_arm` set.
#[test]
fn neoverse_n2_topdown_imports_and_check_accepts_every_metric() {
    let slots = "perf_topdown_arm_slots_total";
    arm_level_1_imports(
        "neoverse-n2",
        "arm-neoverse-n2",
        &[
            (
                "frontend_bound",
                format!("(perf_topdown_frontend_stall_slots_total - {slots} / 5) / {slots}"),
            ),
            (
                "backend_bound",
                format!("perf_topdown_backend_stall_slots_total / {slots}"),
            ),
            (
                "retiring",
                format!("perf_pipeline_ops_retired_total / perf_pipeline_ops_speculated_total * (1 - (perf_topdown_stall_slots_total - {slots} / 5) / {slots})"),
            ),
        ],
    );
}

/// `config/metrics/<name>.json` imported for the Arm `fixture` (core PMU
/// `armv8_pmuv3_0`): its 4 metrics taken, the golden
/// `<name>-target.yaml`, `check --strict` accepting its 6 events and 4
/// shares; then the default config there takes `want`.
fn arm_level_1_imports(name: &str, fixture: &str, want: &[(&str, String)]) {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _) = import_for(
        dir.path(),
        &format!("config/metrics/{name}.json"),
        fixture,
        &["--core-pmu", "armv8_pmuv3_0"],
        4,
        &format!("{name}-target.yaml"),
    );
    let v = strict_check(fixture, &cfg);
    all_resolved(&v, "metrics", 6);
    all_resolved(&v, "derived", 4);
    default_takes(fixture, want);
}

/// Arm Neoverse V2: perf's level-1 formulas for the V2
/// (config/metrics/neoverse-v2.json, `#slots` 8) imported for the
/// arm-neoverse-v2 tree; `check --strict` accepts every metric and
/// derived entry there, and the default config's four shares take the V2
/// alternative (the fifth) over `perf_topdown_arm_v2_slots_total`.
#[test]
fn neoverse_v2_topdown_imports_and_check_accepts_every_metric() {
    let slots = "perf_topdown_arm_v2_slots_total";
    arm_level_1_imports(
        "neoverse-v2",
        "arm-neoverse-v2",
        &[
            (
                "frontend_bound",
                format!("perf_topdown_frontend_stall_slots_total / {slots}"),
            ),
            (
                "backend_bound",
                format!("perf_topdown_backend_stall_slots_total / {slots}"),
            ),
            (
                "retiring",
                format!("perf_pipeline_ops_retired_total / perf_pipeline_ops_speculated_total * (1 - perf_topdown_stall_slots_total / {slots})"),
            ),
        ],
    );
}

use crate::common::TOPDOWN_L1_L2;

/// Ice Lake-SP's top-down levels 1 and 2 (config/metrics/icelakex.json:
/// perf's icx-metrics.json formulas) imported for the intel-icx fixture:
/// every metric taken, and `check --strict`, with and without
/// `--simulate`, resolves every event and every derived metric there.
/// Then the default config on the same fixture, with its cpuinfo
/// (`GenuineIntel-6-6A-6`): each share resolves by the Ice Lake formula,
/// the first alternative.
#[test]
fn ice_lake_topdown_imports_and_check_accepts_every_metric() {
    let icx = root().join("tests/fixtures/sysfs/intel-icx");
    let icx = icx.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cfg, yaml) = import_for(
        dir.path(),
        "config/metrics/icelakex.json",
        "intel-icx",
        &[],
        12,
        "icelakex-target.yaml",
    );
    let first = yaml
        .lines()
        .find(|l| l.contains("cpu/event=0x0,"))
        .unwrap_or("");
    assert!(first.contains("umask=0x4/"), "slots first: {yaml}");
    let v = strict_check("intel-icx", &cfg);
    let n = v["metrics"].as_array().map_or(0, Vec::len);
    all_resolved(&v, "metrics", n);
    let names: Vec<&str> = all_resolved(&v, "derived", 12)
        .iter()
        .map(|d| d["name"].as_str().unwrap_or(""))
        .collect();
    for s in TOPDOWN_L1_L2 {
        assert!(names.contains(&s), "{s} in {names:?}");
    }
    let v = check_json(&[
        "--strict",
        "--path.sysfs",
        icx,
        "--config.file",
        cfg.to_str().unwrap(),
    ]);
    all_resolved(&v, "metrics", n);
    all_resolved(&v, "derived", 12);

    let procfs = root().join("tests/fixtures/procfs/intel-icx");
    let v = check_json(&[
        "--simulate",
        "--path.sysfs",
        icx,
        "--path.procfs",
        procfs.to_str().unwrap(),
    ]);
    for s in TOPDOWN_L1_L2 {
        assert_eq!(derived(&v, s)["status"], "resolved", "{}", derived(&v, s));
    }
    let sum = "(perf_topdown_frontend_bound_slots_total + perf_topdown_bad_speculation_slots_total + perf_topdown_retiring_slots_total + perf_topdown_backend_bound_slots_total)";
    assert_eq!(
        derived(&v, "backend_bound")["expr"],
        format!(
            "perf_topdown_backend_bound_slots_total / {sum} + 5 * perf_topdown_recovery_periods_total / perf_topdown_slots_total"
        )
    );
}
