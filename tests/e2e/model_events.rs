//! Issue 17, L2: the model-specific encodings of the default config's `l2`
//! set, fixture by fixture, against values computed here by hand from the
//! fixture's own `format/` files and the event/umask of the cited public
//! source (the YAML comments of config/default.yaml name it); an unknown
//! model; and the families exported on the simulated PMU.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every fixture tree (a new one must get its line in [`expected`]).
fn fixtures() -> Vec<String> {
    let dir = common::repo_root().join("tests/fixtures/sysfs");
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    assert!(v.len() >= 7, "{v:?}");
    v
}

/// One encoding: (PMU, type, config).
type Enc = (String, u32, u64);

fn pmu_dir(fixture: &str, pmu: &str) -> PathBuf {
    common::fixture(fixture)
        .join("bus/event_source/devices")
        .join(pmu)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Places `value` into `config` as `format/<term>` of the fixture says
/// (`config:lo-hi[,lo-hi]`, low bits first), written out independently of
/// the crate's format parser.
fn place(fixture: &str, pmu: &str, term: &str, value: u64) -> u64 {
    let spec = read(&pmu_dir(fixture, pmu).join("format").join(term));
    let ranges = spec
        .trim()
        .strip_prefix("config:")
        .unwrap_or_else(|| panic!("{fixture} {pmu}/{term}: `{spec}` is not in config"));
    let (mut out, mut v) = (0u64, value);
    for r in ranges.split(',') {
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().unwrap(), b.parse::<u32>().unwrap()),
            None => (r.parse().unwrap(), r.parse().unwrap()),
        };
        let width = hi - lo + 1;
        out |= (v & ((1u64 << width) - 1)) << lo;
        v >>= width;
    }
    assert_eq!(
        v, 0,
        "{fixture} {pmu}/{term}: {value:#x} does not fit {spec}"
    );
    out
}

/// `pmu/event=E,umask=U/` encoded by hand.
fn raw(fixture: &str, pmu: &str, event: u64, umask: u64) -> Enc {
    let ty = read(&pmu_dir(fixture, pmu).join("type"))
        .trim()
        .parse()
        .unwrap();
    let config = place(fixture, pmu, "event", event) | place(fixture, pmu, "umask", umask);
    (pmu.to_string(), ty, config)
}

/// A named sysfs event of a PMU whose only term is `event=0x...`.
fn named(fixture: &str, pmu: &str, name: &str) -> Enc {
    let text = read(&pmu_dir(fixture, pmu).join("events").join(name));
    let hex = text
        .trim()
        .strip_prefix("event=0x")
        .unwrap_or_else(|| panic!("{pmu}/{name}: `{text}`"));
    let ty = read(&pmu_dir(fixture, pmu).join("type"))
        .trim()
        .parse()
        .unwrap();
    let event = u64::from_str_radix(hex, 16).unwrap();
    (pmu.to_string(), ty, place(fixture, pmu, "event", event))
}

/// What the cited sources give each fixture: (misses, references); empty
/// where nothing counts L2 (then the metrics are unavailable).
fn expected(f: &str) -> (Vec<Enc>, Vec<Enc>) {
    match f {
        // Intel perfmon SKX/SKL: L2_RQSTS.MISS 0x24/0x3F, .REFERENCES 0x24/0xFF.
        "intel-skx" | "intel-client" => (
            vec![raw(f, "cpu", 0x24, 0x3f)],
            vec![raw(f, "cpu", 0x24, 0xff)],
        ),
        // Intel perfmon ICX (the default's comments): L2_RQSTS.ALL_DEMAND_MISS
        // 0x24/0x27; L2_RQSTS.ALL_DEMAND_DATA_RD + ALL_RFO + ALL_CODE_RD
        // (0x24 with 0xE1, 0xE2, 0xE4).
        "intel-icx" => (
            vec![raw(f, "cpu", 0x24, 0x27)],
            vec![
                raw(f, "cpu", 0x24, 0xe1),
                raw(f, "cpu", 0x24, 0xe2),
                raw(f, "cpu", 0x24, 0xe4),
            ],
        ),
        // ADL goldencove L2_RQSTS.MISS/REFERENCES on cpu_core; gracemont
        // L2_REQUEST.MISS 0x24/0x01 and L2_REQUEST.ALL 0x24/0x00 on cpu_atom.
        "intel-hybrid" => (
            vec![
                raw(f, "cpu_core", 0x24, 0x3f),
                raw(f, "cpu_atom", 0x24, 0x01),
            ],
            vec![
                raw(f, "cpu_core", 0x24, 0xff),
                raw(f, "cpu_atom", 0x24, 0x00),
            ],
        ),
        // perf amdzen3/amdzen4: all_l2_cache_misses = 0x64/0x09 + 0x71/0xff
        // + 0x72/0xff; l2_request_g1 0x60 with all_no_prefetch|l2_hw_pf.
        "amd-zen3" | "amd-zen4" => (
            vec![
                raw(f, "cpu", 0x64, 0x09),
                raw(f, "cpu", 0x71, 0xff),
                raw(f, "cpu", 0x72, 0xff),
            ],
            vec![raw(f, "cpu", 0x60, 0xf9 | 0x02)],
        ),
        // Arm PMUv3 L2D_CACHE_REFILL / L2D_CACHE, as sysfs names them.
        "arm-neoverse-n1" | "arm-neoverse-n2" | "arm-neoverse-v2" => (
            vec![named(f, "armv8_pmuv3_0", "l2d_cache_refill")],
            vec![named(f, "armv8_pmuv3_0", "l2d_cache")],
        ),
        _ => (Vec::new(), Vec::new()),
    }
}

/// `check --json --simulate` on a fixture with the given procfs.
fn check_json(fixture: &str, procfs_args: &[String]) -> Value {
    let f = common::fixture(fixture);
    let o = Command::new(common::EXPORTER)
        .args(["check", "--json", "--simulate", "--path.sysfs"])
        .arg(&f)
        .args(procfs_args)
        .output()
        .expect("run check");
    assert!(
        o.status.success(),
        "{fixture}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("check --json is JSON")
}

fn metric<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn encodings(m: &Value) -> Vec<Enc> {
    let mut v: Vec<Enc> = m["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let hex = i["config"].as_str().unwrap().trim_start_matches("0x");
            (
                i["pmu"].as_str().unwrap().to_string(),
                u32::try_from(i["type"].as_u64().unwrap()).unwrap(),
                u64::from_str_radix(hex, 16).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// For every fixture, the L2 encodings `check --json` shows are exactly
/// the hand-computed ones (on every core PMU's CPUs), or the metrics are
/// unavailable where nothing counts L2.
#[test]
fn l2_encodings_match_the_cited_sources_on_every_fixture() {
    for f in fixtures() {
        let f = f.as_str();
        let v = check_json(f, &common::fixture_procfs_args(f));
        let (misses, refs) = expected(f);
        for (name, want) in [
            ("perf_l2_misses_total", misses),
            ("perf_l2_references_total", refs),
        ] {
            let m = metric(&v, name);
            let mut want = want;
            want.sort();
            if want.is_empty() {
                assert_eq!(m["status"], "unavailable", "{f} {name}: {m}");
                continue;
            }
            assert_ne!(m["status"], "unavailable", "{f} {name}: {m}");
            assert_eq!(encodings(m), want, "{f} {name}");
            assert!(
                m["partial"].as_array().unwrap().is_empty(),
                "{f} {name}: {m}"
            );
        }
    }
}

/// A model the config has no encoding for (a copy of the Skylake-SP
/// cpuinfo with model 999): the L2 metrics are unavailable with "no
/// encoding for CPU <identity>", and the rest keeps working. Without any
/// cpuinfo the reason says the identity is unknown.
#[test]
fn unknown_model_reports_l2_unavailable_and_the_rest_works() {
    let tmp = tempfile::tempdir().unwrap();
    let text = read(&common::fixture_procfs("intel-skx").join("cpuinfo"));
    assert!(text.contains("model\t\t: 85\n"));
    std::fs::write(
        tmp.path().join("cpuinfo"),
        text.replace("model\t\t: 85\n", "model\t\t: 999\n"),
    )
    .unwrap();
    let procfs = vec![
        "--path.procfs".to_string(),
        tmp.path().to_str().unwrap().to_string(),
    ];
    let v = check_json("intel-skx", &procfs);
    assert_eq!(
        v["cpu_identities"][0]["identity"], "GenuineIntel-6-3E7-4",
        "{}",
        v["cpu_identities"]
    );
    for name in ["perf_l2_misses_total", "perf_l2_references_total"] {
        let m = metric(&v, name);
        assert_eq!(m["status"], "unavailable", "{m}");
        let guarded: Vec<&Value> = m["tried"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["problem"] == "no_cpu_encoding")
            .collect();
        assert!(!guarded.is_empty(), "{m}");
        for t in guarded {
            assert_eq!(
                t["reason"], "no encoding for CPU GenuineIntel-6-3E7-4",
                "{t}"
            );
        }
    }
    for name in [
        "perf_cpu_cycles_total",
        "perf_instructions_total",
        "perf_dram_read_bytes_total",
    ] {
        assert_eq!(metric(&v, name)["status"], "resolved", "{name}");
    }

    let none = vec!["--path.procfs".to_string(), "/nonexistent-procfs".into()];
    let v = check_json("intel-skx", &none);
    let m = metric(&v, "perf_l2_misses_total");
    assert_eq!(m["status"], "unavailable");
    assert!(
        m["tried"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("CPU identity unknown ("),
        "{m}"
    );
    assert_eq!(metric(&v, "perf_cpu_cycles_total")["status"], "resolved");
}

/// The simulated PMU accepts the raw encodings: `--simulate` on each
/// fixture with a core PMU that has L2 events exports both L2 families on
/// every CPU of its core PMUs, and marks them available. (QEMU's emulated
/// PMUv3, `qemu-neoverse-n1`, implements no L2 event: [`expected`] gives
/// it none, so the other tests check its L2 metrics are unavailable.)
#[test]
fn simulated_scrapes_export_the_l2_families() {
    // Per CPU (the default sums the core sets per socket): one series per CPU.
    let dir = tempfile::tempdir().unwrap();
    let per_cpu = common::per_cpu_default_config(dir.path());
    for f in fixtures()
        .iter()
        .filter(|f| !matches!(f.as_str(), "vm-no-pmu" | "qemu-neoverse-n1"))
    {
        let exp = common::simulated_exporter_with(f, &per_cpu);
        let r = exp.get("/metrics");
        assert_eq!(r.status, 200, "{f}: {}", r.body);
        let series = common::parse_exposition(&r.body).unwrap();
        let online =
            std::fs::read_to_string(common::fixture(f).join("devices/system/cpu/online")).unwrap();
        let last: u32 = online.trim().rsplit('-').next().unwrap().parse().unwrap();
        for name in ["perf_l2_misses_total", "perf_l2_references_total"] {
            let cpus: Vec<u32> = common::by_cpu(&series, name).into_keys().collect();
            assert_eq!(cpus, (0..=last).collect::<Vec<_>>(), "{f} {name}");
            assert!(
                r.body.lines().any(|l| l
                    .starts_with(&format!("perf_event_available{{metric=\"{name}\""))
                    && l.ends_with(" 1")),
                "{f} {name}"
            );
        }
    }
}

/// The models without a fixture tree of their own (Cascade Lake, Ice
/// Lake-SP, Sapphire Rapids) take their alternatives by identity alone:
/// the Skylake-SP tree's `cpu` PMU with a cpuinfo copy naming each model
/// (steppings that the kernel's intel-ucode-defs.h lists for the model).
#[test]
fn server_models_without_a_tree_select_their_encodings_by_identity() {
    let f = "intel-skx";
    let ev = |umask| raw(f, "cpu", 0x24, umask);
    let cases: [(u32, u32, Vec<Enc>, Vec<Enc>); 3] = [
        // Cascade Lake: model 0x55 stepping 7 (perfmon CLX, 6-55-[5-F]).
        (85, 7, vec![ev(0x3f)], vec![ev(0xff)]),
        // Ice Lake-SP: model 0x6A (perfmon ICX): demand requests.
        (106, 6, vec![ev(0x27)], vec![ev(0xe1), ev(0xe2), ev(0xe4)]),
        // Sapphire Rapids: model 0x8F (perfmon SPR).
        (143, 8, vec![ev(0x3f)], vec![ev(0xff)]),
    ];
    let text = read(&common::fixture_procfs(f).join("cpuinfo"));
    for (model, stepping, misses, refs) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let copy = text
            .replace("model\t\t: 85\n", &format!("model\t\t: {model}\n"))
            .replace("stepping\t: 4\n", &format!("stepping\t: {stepping}\n"));
        std::fs::write(tmp.path().join("cpuinfo"), copy).unwrap();
        let args = vec![
            "--path.procfs".to_string(),
            tmp.path().to_str().unwrap().to_string(),
        ];
        let v = check_json(f, &args);
        for (name, mut want) in [
            ("perf_l2_misses_total", misses),
            ("perf_l2_references_total", refs),
        ] {
            want.sort();
            assert_eq!(encodings(metric(&v, name)), want, "model {model} {name}");
        }
    }
}

/// `check`'s text names each core PMU's identity first, and a skipped
/// guarded alternative with the identity it did not match.
#[test]
fn check_text_shows_the_identity_and_why_a_guard_skipped() {
    let f = "amd-zen4";
    let o = Command::new(common::EXPORTER)
        .args(["check", "--simulate", "--path.sysfs"])
        .arg(common::fixture(f))
        .args(common::fixture_procfs_args(f))
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.starts_with(
            "CPU identity (what `requires_cpu` matches):\n  cpu (CPU 0): AuthenticAMD-25-11-1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "tried cpu/event=0x24,umask=0x3f/: no encoding for CPU AuthenticAMD-25-11-1\n"
        ),
        "{text}"
    );
}
