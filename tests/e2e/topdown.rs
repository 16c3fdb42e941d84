//! Top-down level 1 (issue #17, items 3 and 4) end to end, through the real
//! binary on the simulated PMU of every fixture.
//!
//! * `check --json` shows, for every fixture, the top-down encodings; each is
//!   asserted against the value computed by hand below from the fixture's
//!   `format/` and `events/` files and the source the default config cites:
//!   - Intel perf metrics (intel-hybrid `cpu_core`, type 4): `slots` is
//!     `event=0x00,umask=0x4` → 0x400; `topdown-retiring`, `-bad-spec`,
//!     `-fe-bound`, `-be-bound` are umask 0x80..0x83 → 0x8000..0x8300
//!     (format `event` config:0-7, `umask` config:8-15), counted on
//!     `cpu_core` only (`cpu_core/topdown-*/` first). `cpu_atom` (type 10)
//!     has no `slots`; its `topdown-*` (`event=0xc2`, `0x73`, `0x71`,
//!     `0x74`) are the E-cores' own `perf_topdown_atom_*` families.
//!   - Intel Skylake (intel-skx GenuineIntel-6-55-4, intel-client 6-5E-3,
//!     `cpu` type 4, same formats), perf's skylakex pipeline.json /
//!     frontend.json: CPU_CLK_UNHALTED.THREAD_P 0x3C → 0x3c × 4 slots;
//!     UOPS_RETIRED.RETIRE_SLOTS 0xC2/0x02 → 0x2c2; IDQ_UOPS_NOT_DELIVERED.CORE
//!     0x9C/0x01 → 0x19c; UOPS_ISSUED.ANY 0x0E/0x01 → 0x10e;
//!     INT_MISC.RECOVERY_CYCLES 0x0D/0x01 → 0x10d × 4 slots.
//!   - AMD Zen 4 (amd-zen4 AuthenticAMD-25-11-1, `event` config:0-7,32-35,
//!     `umask` config:8-15), perf's amdzen4 json: ls_not_halted_cyc 0x76 × 6
//!     slots; ex_ret_ops 0xC1; de_src_op_disp.all 0xAA/0x07 → 0x7aa;
//!     de_no_dispatch_per_slot (event 0x1A0: 0xa0 in bits 0-7, 0x1 in bits
//!     32-35) umask 0x01 → 0x1_0000_01a0, 0x1E → 0x1_0000_1ea0, 0x60 →
//!     0x1_0000_60a0.
//!   - Arm (arm-neoverse-n1, `armv8_pmuv3_0` type 10, `event` config:0-15):
//!     STALL_FRONTEND 0x23, STALL_BACKEND 0x24 (Arm ARM common events).
//!   - AMD Zen 3 (AuthenticAMD-25-1-1): no encoding for its CPU; the VM: no
//!     core PMU.
//! * An unknown CPU model: the model-guarded metrics are unavailable with
//!   "no encoding for CPU <identity>", everything else still resolves.
//! * `serve --simulate` on intel-hybrid exports the five families for the
//!   `cpu_core` CPUs, and says why `cpu_atom` has no slots.

use crate::common;

use common::{fixture, fixture_procfs_args, EXPORTER};
use serde_json::Value;
use std::collections::BTreeMap;

const FAMILIES: [&str; 10] = [
    "perf_topdown_slots_total",
    "perf_topdown_retiring_slots_total",
    "perf_topdown_bad_speculation_slots_total",
    "perf_topdown_frontend_bound_slots_total",
    "perf_topdown_backend_bound_slots_total",
    "perf_topdown_issued_slots_total",
    "perf_topdown_recovery_slots_total",
    "perf_topdown_smt_contention_slots_total",
    "perf_topdown_frontend_stall_cycles_total",
    "perf_topdown_backend_stall_cycles_total",
];

/// `check --json --simulate` on a fixture (its procfs, or `procfs`).
fn check_json(fixture_name: &str, procfs: Option<&std::path::Path>) -> Value {
    let sysfs = fixture(fixture_name);
    let mut args = vec![
        "check".to_string(),
        "--json".into(),
        "--simulate".into(),
        "--path.sysfs".into(),
        sysfs.to_str().expect("utf-8").into(),
    ];
    match procfs {
        Some(p) => args.extend(["--path.procfs".into(), p.to_str().expect("utf-8").into()]),
        None => args.extend(fixture_procfs_args(fixture_name)),
    }
    let o = std::process::Command::new(EXPORTER)
        .args(&args)
        .output()
        .expect("run check");
    assert!(
        o.status.success(),
        "{fixture_name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("check --json")
}

/// Per top-down family: `pmu:type:config×scale` of each instance, or
/// `unavailable` with each alternative's problem code.
fn encodings(check: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for m in check["metrics"].as_array().expect("metrics") {
        let name = m["metric"].as_str().expect("metric");
        if !name.starts_with("perf_topdown_") {
            continue;
        }
        let shown = if m["status"] == "unavailable" {
            let codes: Vec<&str> = m["tried"]
                .as_array()
                .expect("tried")
                .iter()
                .map(|t| t["problem"].as_str().unwrap_or("?"))
                .collect();
            format!("unavailable {}", codes.join(","))
        } else {
            let insts: Vec<String> = m["instances"]
                .as_array()
                .expect("instances")
                .iter()
                .map(|i| {
                    format!(
                        "{}:{}:{}x{}",
                        i["pmu"].as_str().expect("pmu"),
                        i["type"],
                        i["config"].as_str().expect("config"),
                        i["scale"]
                    )
                })
                .collect();
            insts.join(" ")
        };
        out.insert(name.to_string(), shown);
    }
    out
}

/// The hand-computed expectations (see the module docs), in FAMILIES order.
fn expected(fixture_name: &str) -> [&'static str; 10] {
    const NONE: &str = "unavailable not_on_platform";
    // The perf-metrics events: `cpu_core/...` (hybrid P-cores) then
    // `core/...` (a core PMU without hybrid cores).
    const PERF_METRICS: &str = "unavailable not_on_platform,not_on_platform";
    // Alternatives: perf metrics, Skylake, Zen 4 (or the ones a family has).
    const SLOTS_3: &str = "unavailable not_on_platform,no_cpu_encoding,no_cpu_encoding";
    const TWO_GUARDED: &str =
        "unavailable not_on_platform,not_on_platform,no_cpu_encoding,no_cpu_encoding";
    const BACKEND: &str = "unavailable not_on_platform,not_on_platform,no_cpu_encoding";
    const ONE_GUARDED: &str = "unavailable no_cpu_encoding";
    const GUARDED_PAIR: &str = "unavailable no_cpu_encoding,no_cpu_encoding";
    let skylake = [
        "cpu:4:0x3cx4.0",
        "cpu:4:0x2c2x1.0",
        PERF_METRICS,
        "cpu:4:0x19cx1.0",
        BACKEND,
        "cpu:4:0x10ex1.0",
        "cpu:4:0x10dx4.0",
        ONE_GUARDED,
        NONE,
        NONE,
    ];
    let no_slots = [
        SLOTS_3,
        TWO_GUARDED,
        PERF_METRICS,
        TWO_GUARDED,
        BACKEND,
        GUARDED_PAIR,
        ONE_GUARDED,
        ONE_GUARDED,
        NONE,
        NONE,
    ];
    match fixture_name {
        "intel-hybrid" => [
            "cpu_core:4:0x400x1.0",
            // The P-cores' only: the E-cores' are perf_topdown_atom_*.
            "cpu_core:4:0x8000x1.0",
            "cpu_core:4:0x8100x1.0",
            "cpu_core:4:0x8200x1.0",
            "cpu_core:4:0x8300x1.0",
            GUARDED_PAIR,
            ONE_GUARDED,
            ONE_GUARDED,
            NONE,
            NONE,
        ],
        "intel-skx" | "intel-client" => skylake,
        // Ice Lake-SP: the `cpu` PMU's perf-metrics `slots` and level-1
        // `topdown-*` (no level-2 metric events), UOPS_ISSUED.ANY under
        // the widened Skylake guard; Skylake's recovery cycles (×4) not.
        "intel-icx" => [
            "cpu:4:0x400x1.0",
            "cpu:4:0x8000x1.0",
            "cpu:4:0x8100x1.0",
            "cpu:4:0x8200x1.0",
            "cpu:4:0x8300x1.0",
            "cpu:4:0x10ex1.0",
            ONE_GUARDED,
            ONE_GUARDED,
            NONE,
            NONE,
        ],
        "amd-zen4" => [
            "cpu:4:0x76x6.0",
            "cpu:4:0xc1x1.0",
            PERF_METRICS,
            "cpu:4:0x1000001a0x1.0",
            "cpu:4:0x100001ea0x1.0",
            "cpu:4:0x7aax1.0",
            ONE_GUARDED,
            "cpu:4:0x1000060a0x1.0",
            NONE,
            NONE,
        ],
        // Arm: stall cycles only (Neoverse N2 and V2 slot events are the
        // `topdown_arm` set's own families, tests/sim/topdown_arm.rs).
        // AMD Zen 3 (AuthenticAMD-25-1-1): no Zen 4 events, nothing.
        "arm-neoverse-n1" | "arm-neoverse-n2" | "arm-neoverse-v2" => {
            let mut arm = no_slots;
            arm[8] = "armv8_pmuv3_0:10:0x23x1.0";
            arm[9] = "armv8_pmuv3_0:10:0x24x1.0";
            arm
        }
        // QEMU's emulated PMUv3 (a device-tree PMU: `armv8_pmuv3`, type 8)
        // lists the stall events as Neoverse N1 does.
        "qemu-neoverse-n1" => {
            let mut arm = no_slots;
            arm[8] = "armv8_pmuv3:8:0x23x1.0";
            arm[9] = "armv8_pmuv3:8:0x24x1.0";
            arm
        }
        "amd-zen3" => no_slots,
        // No core PMU: every alternative needs one (a guard is not even
        // looked at without a CPU to match).
        "vm-no-pmu" => {
            const N1: &str = "unavailable needs_hardware_pmu";
            const N2: &str = "unavailable needs_hardware_pmu,needs_hardware_pmu";
            const N3: &str = "unavailable needs_hardware_pmu,needs_hardware_pmu,needs_hardware_pmu";
            // `cpu_core/...` names a PMU this host has not.
            const P1: &str = "unavailable not_on_platform,needs_hardware_pmu";
            const P2: &str = "unavailable not_on_platform,needs_hardware_pmu,needs_hardware_pmu";
            const P3: &str = "unavailable not_on_platform,needs_hardware_pmu,needs_hardware_pmu,needs_hardware_pmu";
            [N3, P3, P1, P3, P2, N2, N1, N1, N1, N1]
        }
        other => panic!("no hand-computed top-down encodings for fixture {other}: add them"),
    }
}

#[test]
fn check_json_shows_the_topdown_encodings_of_every_fixture() {
    let fixtures = common::fixture_names();
    assert!(fixtures.len() >= 7, "{fixtures:?}");
    let mut wrong = Vec::new();
    for f in &fixtures {
        let got = encodings(&check_json(f, None));
        for (family, want) in FAMILIES.iter().zip(expected(f)) {
            let have = got.get(*family).map_or("missing", String::as_str);
            if have != want {
                wrong.push(format!("{f} {family}:\n  got  {have}\n  want {want}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A Skylake server's sysfs with a CPU model no `requires_cpu` pattern
/// knows: the model-guarded top-down metrics say "no encoding for CPU
/// <identity>", and everything else keeps resolving.
#[test]
fn unknown_model_reports_no_encoding_and_the_rest_works() {
    let procfs = tempfile::tempdir().expect("tempdir");
    let cpuinfo = std::fs::read_to_string(common::fixture_procfs("intel-skx").join("cpuinfo"))
        .expect("intel-skx cpuinfo");
    // Model 85 (0x55) becomes 250 (0xFA), a model perf's mapfile.csv lacks.
    let changed = cpuinfo.replace("model\t\t: 85\n", "model\t\t: 250\n");
    assert_ne!(changed, cpuinfo, "the model line moved");
    std::fs::write(procfs.path().join("cpuinfo"), changed).expect("write cpuinfo");
    let check = check_json("intel-skx", Some(procfs.path()));
    let identity = "GenuineIntel-6-FA-4";
    assert_eq!(check["cpu_identities"][0]["identity"], identity, "{check}");
    let metrics = check["metrics"].as_array().expect("metrics");
    let by_name = |n: &str| {
        metrics
            .iter()
            .find(|m| m["metric"] == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    for guarded in [
        "perf_topdown_slots_total",
        "perf_topdown_retiring_slots_total",
        "perf_topdown_frontend_bound_slots_total",
        "perf_topdown_issued_slots_total",
        "perf_topdown_recovery_slots_total",
    ] {
        let m = by_name(guarded);
        assert_eq!(m["status"], "unavailable", "{m}");
        assert_eq!(m["class"], "not_on_platform", "{m}");
        let last = m["tried"].as_array().expect("tried").last().expect("tried");
        assert_eq!(last["problem"], "no_cpu_encoding", "{m}");
        assert_eq!(
            last["reason"],
            format!("no encoding for CPU {identity}"),
            "{m}"
        );
    }
    for counted in [
        "perf_cpu_cycles_total",
        "perf_instructions_total",
        "perf_dram_read_bytes_total",
    ] {
        assert_ne!(by_name(counted)["status"], "unavailable", "{counted}");
    }
}

/// `serve --simulate` on the hybrid fixture: the five families on the P-cores
/// (CPUs 0-15), whose shares add up to the slots (within the kernel's
/// rounding of 8-bit fractions: the simulator's shares are in 255ths); the
/// E-cores (16-27) count their own topdown-* events as the
/// `perf_topdown_atom_*` families (no `slots` event: 5 slots a cycle), and
/// the landing page says why `slots` is the P-cores' only.
#[test]
fn serve_on_hybrid_exports_the_five_families_for_cpu_core() {
    // Per CPU (the default config sums the topdown set per socket).
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = common::simulated_exporter_with(
        "intel-hybrid",
        &common::per_cpu_default_config(dir.path()),
    );
    let metrics = exp.get("/metrics");
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let mut values: BTreeMap<(String, u32), f64> = BTreeMap::new();
    for line in metrics.body.lines() {
        let Some(rest) = line.strip_prefix("perf_topdown_") else {
            continue;
        };
        let (series, v) = rest.rsplit_once(' ').expect("value");
        let (family, labels) = series.split_once('{').expect("labels");
        let cpu = labels
            .strip_prefix("cpu=\"")
            .and_then(|l| l.strip_suffix("\"}"))
            .expect("cpu label")
            .parse()
            .expect("cpu");
        values.insert((family.to_string(), cpu), v.parse().expect("number"));
    }
    let five = [
        "slots_total",
        "retiring_slots_total",
        "bad_speculation_slots_total",
        "frontend_bound_slots_total",
        "backend_bound_slots_total",
    ];
    for cpu in 0..16 {
        let v = |f: &str| {
            *values
                .get(&(f.to_string(), cpu))
                .unwrap_or_else(|| panic!("perf_topdown_{f} on cpu {cpu}: {values:?}"))
        };
        let slots = v(five[0]);
        assert!(slots > 0.0, "cpu {cpu}");
        let sum: f64 = five[1..].iter().map(|f| v(f)).sum();
        // One collection reads the group at once: four truncations at most.
        assert!(
            (slots - sum).abs() <= 4.0,
            "cpu {cpu}: slots {slots}, categories {sum}"
        );
    }
    // The E-cores count their own categories, under their own names (a
    // P-core share never divides an E-core count), over 5 slots a cycle.
    let atom = [
        "atom_slots_total",
        "atom_retiring_slots_total",
        "atom_frontend_bound_slots_total",
        "atom_backend_bound_slots_total",
    ];
    for cpu in 16..28 {
        for f in &five {
            assert!(
                !values.contains_key(&(f.to_string(), cpu)),
                "cpu_atom CPU {cpu} has {f}"
            );
        }
        let v = |f: &str| {
            *values
                .get(&(f.to_string(), cpu))
                .unwrap_or_else(|| panic!("perf_topdown_{f} on cpu {cpu}: {values:?}"))
        };
        let slots = v(atom[0]);
        let three: f64 = atom[1..].iter().map(|f| v(f)).sum();
        assert!(
            slots > 0.0 && three < slots,
            "cpu {cpu}: slots {slots}, three categories {three}"
        );
    }
    for cpu in 0..16 {
        for f in &atom {
            assert!(
                !values.contains_key(&(f.to_string(), cpu)),
                "cpu_core CPU {cpu} has {f}"
            );
        }
    }
    // Only the P-cores and E-cores: nothing else carries top-down series.
    assert_eq!(values.keys().filter(|(_, c)| *c >= 28).count(), 0);
    let page = exp.get("/");
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("cpu_atom has no such event: counted on cpu_core only"),
        "the landing page does not say why cpu_atom has no slots"
    );
}
