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

const SKX: [&str; 2] = [
    "tests/fixtures/perf-json/skylakex/events.json",
    "tests/fixtures/perf-json/skylakex/skx-metrics.json",
];

#[test]
fn perf_json_becomes_a_config_check_accepts_on_the_matching_fixture() {
    let o = run(&["metrics", "import", SKX[0], SKX[1]]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let yaml = String::from_utf8(o.stdout).expect("UTF-8");
    let golden: PathBuf = root().join("tests/golden/import/skylakex.yaml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &yaml).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        yaml,
        want,
        "the imported config differs from {}",
        golden.display()
    );

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

    let skx = root().join("tests/fixtures/sysfs/intel-skx");
    let o = run(&[
        "check",
        "--json",
        "--strict",
        "--simulate",
        "--path.sysfs",
        skx.to_str().unwrap(),
        "--config.file",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let metrics = v["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 13);
    for m in metrics {
        assert_eq!(m["status"], "resolved", "{m}");
    }
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
