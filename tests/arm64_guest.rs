//! Counting through a real kernel PMU driver: the aarch64 build of the
//! exporter in an arm64 guest under QEMU (software emulation), against the
//! guest kernel's `armv8_pmuv3` driver (issue 25).
//!
//! `scripts/arm64-guest.sh prepare` (run by `scripts/test.sh`) installs
//! QEMU, fetches Debian's arm64 kernel and busybox into `.cache/arm64` and
//! cross-builds the exporter and the workload (`tests/arm64/workload.c`).
//! Each test boots the guest once (`scripts/arm64-guest.sh boot`) with a
//! scenario script of `tests/arm64/`, reads the serial console and asserts.
//! A missing piece fails the test, naming what to run; nothing is skipped.
//!
//! The guest runs with `-icount shift=0 -smp 1`: user-mode instructions are
//! exact and user-mode cycles equal them (QEMU's PMU clock is 1 GHz, one
//! instruction per nanosecond). The workload moves itself into its cgroup,
//! counts itself (`instructions:u`, `cycles:u` in one group) and prints the
//! counts; the rest of its user-mode life is a few instructions.
//!
//! The tests take [`common::serial`]: QEMU is CPU-bound and the machine
//! small.

mod common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one boot plus scenario may take. A quiet machine needs 5-20 s;
/// a CI runner busy with other test crates several times that.
const BOOT_DEADLINE: Duration = Duration::from_secs(600);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cache() -> PathBuf {
    std::env::var_os("ARM64_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/arm64"))
}

/// Fails (never skips) when `scripts/arm64-guest.sh prepare` has not run.
fn require_prepared() {
    let missing: Vec<String> = ["vmlinuz", "busybox", "perf-exporter", "workload"]
        .iter()
        .map(|f| cache().join(f))
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "the arm64 guest is not prepared: missing {missing:?}; run scripts/arm64-guest.sh prepare \
         (scripts/test.sh does)"
    );
    // The exporter in the cache must be this tree's build.
    let built = repo().join("target/aarch64-unknown-linux-gnu/debug/perf-exporter");
    if let (Ok(b), Ok(c)) = (
        std::fs::metadata(&built).and_then(|m| m.modified()),
        std::fs::metadata(cache().join("perf-exporter")).and_then(|m| m.modified()),
    ) {
        assert!(
            c >= b,
            "{} is older than {}: run scripts/arm64-guest.sh prepare",
            cache().join("perf-exporter").display(),
            built.display()
        );
    }
}

/// What the guest printed on its serial console (`\r` removed).
struct Console {
    text: String,
    what: String,
}

impl Console {
    /// The output of `section NAME cmd...` in the scenario: the text between
    /// `==== BEGIN NAME` and `==== END NAME rc=N`, and N.
    fn section(&self, name: &str) -> (String, i32) {
        let begin = format!("==== BEGIN {name}\n");
        let end = format!("==== END {name} rc=");
        let Some(b) = self.text.find(&begin) else {
            panic!(
                "{}: no section {name} in the console:\n{}",
                self.what, self.text
            )
        };
        let body = &self.text[b + begin.len()..];
        let Some(e) = body.find(&end) else {
            panic!("{}: section {name} never ended:\n{}", self.what, self.text)
        };
        let rc_text = &body[e + end.len()..];
        let rc: i32 = rc_text
            .split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{}: bad END line of {name}: {rc_text:.40}", self.what));
        (body[..e].to_string(), rc)
    }

    /// A section's output, which must have exited 0.
    fn ok(&self, name: &str) -> String {
        let (out, rc) = self.section(name);
        assert_eq!(rc, 0, "{}: section {name} exited {rc}:\n{out}", self.what);
        out
    }

    /// A section's output parsed as one JSON document.
    fn json(&self, name: &str) -> Value {
        let out = self.ok(name);
        let start = out.find(['{', '[']).unwrap_or(0);
        serde_json::from_str(&out[start..])
            .unwrap_or_else(|e| panic!("{}: section {name} is not JSON ({e}):\n{out}", self.what))
    }

    /// The workload lines (`workload iterations=... instructions=...`) of a
    /// section, each as its key=value map.
    fn workloads(&self, name: &str) -> Vec<BTreeMap<String, u64>> {
        self.ok(name)
            .lines()
            .filter(|l| l.starts_with("workload iterations="))
            .map(|l| {
                l.split_whitespace()
                    .skip(1)
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.parse().expect("a number")))
                    .collect()
            })
            .collect()
    }
}

/// Boots the guest with `-cpu cpu -smp smp`, runs `tests/arm64/<scenario>`
/// (with `files` in its working directory) and returns the console. Panics
/// when the guest never says it finished (a kernel panic, the deadline).
fn boot(cpu: &str, smp: u32, scenario: &str, files: &[PathBuf]) -> Console {
    require_prepared();
    let what = format!("guest -cpu {cpu} -smp {smp} {scenario}");
    let started = Instant::now();
    let mut child = Command::new(repo().join("scripts/arm64-guest.sh"))
        .arg("boot")
        .arg(cpu)
        .arg(smp.to_string())
        .arg(repo().join("tests/arm64").join(scenario))
        .args(files)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot run scripts/arm64-guest.sh: {e}"));
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let every = Duration::from_millis(100);
    let status = common::poll(BOOT_DEADLINE, every, || child.try_wait().expect("wait"));
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let text = String::from_utf8_lossy(&reader.join().expect("reader")).replace('\r', "");
    let stderr = String::from_utf8_lossy(&err_reader.join().expect("reader")).to_string();
    let elapsed = started.elapsed();
    let Some(status) = status else {
        panic!("{what}: still running after {BOOT_DEADLINE:?}; console:\n{text}\nstderr:\n{stderr}")
    };
    assert!(
        status.success(),
        "{what}: QEMU exited {status}; console:\n{text}\nstderr:\n{stderr}"
    );
    assert!(
        text.contains("ARM64-GUEST-UP"),
        "{what}: the guest never ran /init (expected ARM64-GUEST-UP); console:\n{text}\nstderr:\n{stderr}"
    );
    assert!(
        text.contains("ARM64-GUEST-DONE rc=0"),
        "{what}: the scenario did not finish with rc=0 (a kernel panic also ends QEMU with 0); \
         console:\n{text}\nstderr:\n{stderr}"
    );
    eprintln!("{what}: {elapsed:.1?}");
    Console { text, what }
}

fn file(name: &str) -> PathBuf {
    repo().join("tests/arm64").join(name)
}

/// The files the discovery scenario dumped (`==== FILE path` ... `==== EOF`):
/// path (under `/sys` or `/proc`) and exact content.
fn dumped(c: &Console) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = c.text.as_str();
    while let Some(i) = rest.find("==== FILE ") {
        let after = &rest[i + "==== FILE ".len()..];
        let nl = after.find('\n').expect("a FILE line ends");
        let path = after[..nl].to_string();
        let body = &after[nl + 1..];
        let end = body
            .find("==== EOF")
            .unwrap_or_else(|| panic!("{}: {path} never ended", c.what));
        out.insert(path, body[..end].to_string());
        rest = &body[end..];
    }
    out
}

/// Where a dumped guest file lives in the fixtures: `/sys/X` under
/// `tests/fixtures/sysfs/<name>/X`, `/proc/X` under
/// `tests/fixtures/procfs/<name>/X`.
fn fixture_path(name: &str, guest: &str) -> PathBuf {
    let fx = repo().join("tests/fixtures");
    if let Some(p) = guest.strip_prefix("/sys/") {
        fx.join("sysfs").join(name).join(p)
    } else if let Some(p) = guest.strip_prefix("/proc/") {
        fx.join("procfs").join(name).join(p)
    } else {
        panic!("unexpected dumped path {guest}")
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The committed fixture `name` must be exactly what the guest shows
/// (every file, no more). `PERF_EXPORTER_UPDATE_ARM64_FIXTURE=1` rewrites
/// it from the guest instead (after a QEMU or kernel change).
fn compare_or_update_fixture(name: &str, files: &BTreeMap<String, String>) {
    assert!(
        files.keys().any(|p| p.ends_with("armv8_pmuv3/type")),
        "the guest dumped no armv8_pmuv3 PMU: {:?}",
        files.keys().collect::<Vec<_>>()
    );
    let roots = [
        repo().join("tests/fixtures/sysfs").join(name),
        repo().join("tests/fixtures/procfs").join(name),
    ];
    if std::env::var_os("PERF_EXPORTER_UPDATE_ARM64_FIXTURE").is_some() {
        for r in &roots {
            let _ = std::fs::remove_dir_all(r);
        }
        for (guest, text) in files {
            let p = fixture_path(name, guest);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, text).expect("write fixture");
        }
        eprintln!(
            "rewrote the {name} fixture from the guest ({} files)",
            files.len()
        );
        return;
    }
    let mut problems = Vec::new();
    let mut expected: Vec<PathBuf> = files.keys().map(|g| fixture_path(name, g)).collect();
    for (guest, text) in files {
        let p = fixture_path(name, guest);
        match std::fs::read_to_string(&p) {
            Ok(t) if &t == text => {}
            Ok(t) => problems.push(format!("{}: fixture {t:?}, guest {text:?}", p.display())),
            Err(e) => problems.push(format!("{}: {e} (the guest has it: {text:?})", p.display())),
        }
    }
    let mut have = Vec::new();
    for r in &roots {
        files_under(r, &mut have);
    }
    expected.sort();
    for p in have {
        if expected.binary_search(&p).is_err() {
            problems.push(format!("{}: in the fixture, not in the guest", p.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "the {name} fixture differs from the guest's sysfs/procfs (rerun with \
         PERF_EXPORTER_UPDATE_ARM64_FIXTURE=1 to refresh it after a QEMU or kernel change):\n{}",
        problems.join("\n")
    );
}

/// The metrics of a `check --json` report by name.
fn metrics(check: &Value) -> BTreeMap<String, Value> {
    check["metrics"]
        .as_array()
        .expect("check --json has metrics")
        .iter()
        .map(|m| (m["metric"].as_str().expect("metric").to_string(), m.clone()))
        .collect()
}

/// What decides availability in a `check --json` metric: status, class,
/// winning event, its instances' PMU/type/config/CPUs, and each tried
/// alternative's problem code.
fn availability(m: &Value) -> Value {
    let instances: Vec<Value> = m["instances"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|i| {
                    serde_json::json!([i["pmu"], i["type"], i["config"], i["config1"], i["cpus"]])
                })
                .collect()
        })
        .unwrap_or_default();
    let tried: Vec<Value> = m["tried"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|t| serde_json::json!([t["event"], t["problem"]]))
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "status": m["status"], "class": m["class"], "event": m["event"],
        "instances": instances, "tried": tried,
    })
}

/// The MIDRs QEMU gives its CPU models (implementer 0x41, part 0xd0c
/// Neoverse N1 r4p1; part 0xd07 Cortex-A57).
const N1_MIDR: &str = "0x00000000414fd0c1";

/// Scenario 1 on each CPU model: what the real driver offers. Returns the
/// console and `check --json` with tests/arm64/discovery.yaml.
fn discovery(cpu: &str) -> (Console, Value) {
    let c = boot(cpu, 1, "discovery.sh", &[file("discovery.yaml")]);
    let check = c.json("check");
    let m = metrics(&check);
    // Cycles and instructions, generic and PMU forms, on armv8_pmuv3.
    let pmu_type: u64 = dumped(&c)["/sys/bus/event_source/devices/armv8_pmuv3/type"]
        .trim()
        .parse()
        .expect("a type");
    for (metric, event, ty, config) in [
        ("perf_cpu_cycles_total", "cycles", 0, "0x0"),
        ("perf_instructions_total", "instructions", 0, "0x1"),
        (
            "perf_pmu_cycles_total",
            "armv8_pmuv3/cpu_cycles/",
            pmu_type,
            "0x11",
        ),
        (
            "perf_pmu_instructions_total",
            "armv8_pmuv3/inst_retired/",
            pmu_type,
            "0x8",
        ),
    ] {
        let x = &m[metric];
        assert_eq!(x["status"], "resolved", "{cpu}: {metric}: {x:#}");
        assert_eq!(x["event"], event, "{cpu}: {metric}: {x:#}");
        let i = &x["instances"][0];
        assert_eq!(
            (i["pmu"].as_str(), i["type"].as_u64(), i["config"].as_str()),
            (Some("armv8_pmuv3"), Some(ty), Some(config)),
            "{cpu}: {metric}: {x:#}"
        );
    }
    // Branch and cache events: unavailable, with the kernel's reason (the
    // PMU's events/ lacks the architectural event the generic one maps to).
    for (metric, arch) in [
        ("perf_branch_instructions_total", "pc_write_retired"),
        ("perf_branch_misses_total", "br_mis_pred"),
        ("perf_cache_references_total", "l1d_cache"),
        ("perf_cache_misses_total", "l1d_cache_refill"),
    ] {
        let x = &m[metric];
        assert_eq!(
            (x["status"].as_str(), x["class"].as_str()),
            (Some("unavailable"), Some("not_on_platform")),
            "{cpu}: {metric}: {x:#}"
        );
        let t = &x["tried"][0];
        assert_eq!(t["problem"], "not_on_platform", "{cpu}: {metric}: {x:#}");
        let why = t["reason"].as_str().unwrap_or_default();
        assert!(
            why.contains("armv8_pmuv3") && why.contains(arch),
            "{cpu}: {metric}: expected the reason to name armv8_pmuv3 and {arch}, got {why:?}"
        );
    }
    // `list`: cycles and instructions available on the PMU; branch and
    // cache events not.
    let list = c.json("list");
    let ev = |name: &str| -> Value {
        list["events"]
            .as_array()
            .expect("events")
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{cpu}: list has no {name}"))
    };
    for name in [
        "cycles",
        "instructions",
        "armv8_pmuv3/cpu_cycles/",
        "armv8_pmuv3/inst_retired/",
    ] {
        let e = ev(name);
        assert_eq!(
            (&e["available"], &e["pmu"]),
            (&Value::Bool(true), &Value::from("armv8_pmuv3")),
            "{cpu}: {e:#}"
        );
    }
    for name in [
        "branch-misses",
        "cache-misses",
        "L1-dcache-load-misses",
        "LLC-load-misses",
    ] {
        let e = ev(name);
        assert_eq!(
            (&e["available"], &e["problem"]),
            (&Value::Bool(false), &Value::from("not_on_platform")),
            "{cpu}: {e:#}"
        );
    }
    (c, check)
}

/// Scenario 1, Neoverse N1: the real driver's view, `requires_cpu` on the
/// guest's MIDR, the guest's sysfs equal to the committed
/// `qemu-neoverse-n1` fixture, and the simulated PMU on that fixture giving
/// the same availability as the real driver for the same config.
#[test]
fn discovery_on_the_real_driver_neoverse_n1() {
    let _g = common::serial();
    let (c, check) = discovery("neoverse-n1");
    assert_eq!(check["cpu_identities"][0]["identity"], N1_MIDR, "{check:#}");
    let m = metrics(&check);
    assert_eq!(m["perf_n1_instructions_total"]["status"], "resolved");
    let a57 = &m["perf_a57_instructions_total"];
    assert_eq!(
        (a57["status"].as_str(), a57["tried"][0]["problem"].as_str()),
        (Some("unavailable"), Some("no_cpu_encoding")),
        "{a57:#}"
    );
    assert!(
        a57["tried"][0]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(N1_MIDR),
        "{a57:#}"
    );

    // The default config's top-down level 1 on the real driver: QEMU's
    // PMUv3 has no slot events (no STALL_SLOT*, OP_* in its PMCEID), so the
    // Arm alternative of each share (perf's Neoverse N2 formula) is
    // rejected naming the event the driver does not offer,
    // and the share is unavailable, not on this platform.
    let default = c.json("check-default");
    for (name, missing) in [
        ("frontend_bound", "stall_slot_frontend"),
        ("bad_speculation", "op_retired"),
        ("backend_bound", "stall_slot_backend"),
        ("retiring", "op_retired"),
    ] {
        let d = default["derived"]
            .as_array()
            .expect("check --json has derived")
            .iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("{name} in the default's check: {default:#}"));
        assert_eq!(
            (d["status"].as_str(), d["class"].as_str()),
            (Some("unavailable"), Some("not_on_platform")),
            "{d:#}"
        );
        // Found by the slots metric it reads: the alternatives before it
        // differ per share.
        let arm = d["tried"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| {
                t["event"]
                    .as_str()
                    .is_some_and(|e| e.contains("perf_topdown_arm_slots_total"))
            })
            .unwrap_or_else(|| panic!("{name}: no N2 alternative tried: {d:#}"));
        let why = arm["reason"].as_str().unwrap_or_default();
        assert!(
            why.contains(&format!("armv8_pmuv3 has no event `{missing}`")),
            "{name}: the N2 alternative's reason names {missing}: {arm:#}"
        );
    }

    let files = dumped(&c);
    assert_eq!(
        files["/sys/devices/system/cpu/cpu0/regs/identification/midr_el1"].trim(),
        N1_MIDR
    );
    compare_or_update_fixture("qemu-neoverse-n1", &files);

    // The simulated PMU on the captured tree, same config.
    let out = Command::new(common::EXPORTER)
        .arg("--simulate")
        .arg("--path.sysfs")
        .arg(repo().join("tests/fixtures/sysfs/qemu-neoverse-n1"))
        .arg("--config.file")
        .arg(file("discovery.yaml"))
        .args(["check", "--json"])
        .output()
        .expect("run perf-exporter check --simulate");
    let sim: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "simulated check --json: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(sim["cpu_identities"], check["cpu_identities"]);
    let (real, simulated) = (metrics(&check), metrics(&sim));
    assert_eq!(
        real.keys().collect::<Vec<_>>(),
        simulated.keys().collect::<Vec<_>>()
    );
    for (name, r) in &real {
        assert_eq!(
            availability(r),
            availability(&simulated[name]),
            "{name}: the real driver (left) and the simulated PMU (right) disagree"
        );
    }
}

/// Scenario 1, Cortex-A57: the same driver view, and `requires_cpu`
/// selects the A57 alternative from the guest's MIDR.
#[test]
fn discovery_on_the_real_driver_cortex_a57() {
    let _g = common::serial();
    let (c, check) = discovery("cortex-a57");
    let midr = dumped(&c)["/sys/devices/system/cpu/cpu0/regs/identification/midr_el1"]
        .trim()
        .to_string();
    assert!(
        midr.starts_with("0x0000000041") && midr[14..17] == *"d07",
        "expected a Cortex-A57 MIDR (0x41, part 0xd07), got {midr}"
    );
    assert_eq!(check["cpu_identities"][0]["identity"], midr.as_str());
    let m = metrics(&check);
    assert_eq!(m["perf_a57_instructions_total"]["status"], "resolved");
    let n1 = &m["perf_n1_instructions_total"];
    assert_eq!(
        (n1["status"].as_str(), n1["tried"][0]["problem"].as_str()),
        (Some("unavailable"), Some("no_cpu_encoding")),
        "{n1:#}"
    );
}

/// The value of the first sample of `family` in an exposition whose
/// labels contain `labels` (e.g. `cgroup="wl"`).
fn sample(exposition: &str, family: &str, labels: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        let rest = l.strip_prefix(family)?;
        let (lbl, v) = rest.rsplit_once(' ')?;
        (lbl.starts_with('{') && lbl.contains(labels) || lbl.is_empty() && labels.is_empty())
            .then(|| v.parse().ok())
            .flatten()
    })
}

/// How far a per-cgroup user-mode count may exceed the workload's own
/// count: the instructions the workload runs in its cgroup outside its
/// counted loop (returning from the cgroup.procs write, opening and
/// enabling its counters; disabling and reading them, moving back to the
/// parent cgroup). A few dozen, identical on every boot (-icount); see the
/// figures in docs/src/performance.md.
const STARTUP_SLACK: f64 = 300.0;

/// Scenario 2: exact counts. The perf and bpf backends' per-cgroup
/// `instructions:u` equal the workload's self-measured count within
/// [`STARTUP_SLACK`], `cycles:u` equal instructions (QEMU's 1 GHz PMU
/// clock under -icount shift=0), and `stat`'s system-wide user-mode count
/// covers the workload. Before any cgroup controller is applied, the perf
/// backend names the cgroup's missing perf_event state (the issue's errno 2).
/// Scenario 5 too: the bpf backend on the hardware counters agrees with the
/// perf backend.
#[test]
fn exact_counts_per_cgroup_both_backends_and_stat() {
    let _g = common::serial();
    let c = boot(
        "neoverse-n1",
        1,
        "counts.sh",
        &[file("counts-perf.yaml"), file("counts-bpf.yaml")],
    );
    // The hierarchy as a minimal init leaves it.
    assert_eq!(
        c.ok("subtree-before").trim(),
        "",
        "expected no controller applied at the root"
    );
    let log = c.ok("unapplied-log");
    assert!(
        // logfmt: the issue's value is quoted, its quotes escaped.
        log.contains(
            r#"cgroup \"wl-perf\" not counted: the kernel has no perf_event controller state"#
        ) && !log.contains("no PMU claims"),
        "expected the perf backend to name the cgroup's missing perf_event state, log:\n{log}"
    );
    c.ok("unapplied-wait");

    let mut per_backend = Vec::new();
    for backend in ["perf", "bpf"] {
        c.ok(&format!("ready-{backend}"));
        let w = c.workloads(&format!("workload-{backend}"));
        assert_eq!(w.len(), 1, "{backend}: one workload line");
        let (n, own, own_cycles) = (w[0]["iterations"], w[0]["instructions"], w[0]["cycles"]);
        assert_eq!(
            own,
            8 * n + 4,
            "{backend}: the workload's own count is 8 per iteration + 4"
        );
        assert_eq!(
            own_cycles, own,
            "{backend}: user-mode cycles equal instructions"
        );
        let m = c.ok(&format!("metrics-{backend}"));
        let label = format!("cgroup=\"wl-{backend}\"");
        let ins = sample(&m, "perf_cgroup_user_instructions_total", &label)
            .unwrap_or_else(|| panic!("{backend}: no per-cgroup instructions:u in\n{m}"));
        let cyc = sample(&m, "perf_cgroup_user_cycles_total", &label)
            .unwrap_or_else(|| panic!("{backend}: no per-cgroup cycles:u in\n{m}"));
        let extra = ins - own as f64;
        eprintln!("{backend}: per-cgroup instructions:u {ins} cycles:u {cyc}, the workload's own {own}: +{extra}");
        assert!(
            (0.0..=STARTUP_SLACK).contains(&extra),
            "{backend}: per-cgroup instructions:u {ins}, expected the workload's own {own} + 0..{STARTUP_SLACK}"
        );
        assert!(
            (cyc - ins).abs() <= STARTUP_SLACK,
            "{backend}: per-cgroup cycles:u {cyc}, expected instructions:u {ins} within {STARTUP_SLACK}"
        );
        per_backend.push((backend, extra, cyc - own as f64));
    }
    // Scenario 5: the bpf backend (bpf_perf_event_read_value on the
    // hardware counters, charged at cgroup switch) agrees with the perf
    // backend (PERF_FLAG_PID_CGROUP) on the same workload.
    assert_eq!(
        (per_backend[0].1, per_backend[0].2),
        (per_backend[1].1, per_backend[1].2),
        "the perf and bpf backends disagree on (instructions:u, cycles:u) beyond the workload's own count: {per_backend:?}"
    );

    // stat counts every user-mode instruction of the CPU (the exporter's
    // own, busybox's): it must cover the workload, and cycles:u equal
    // instructions:u.
    let w = c.workloads("workload-stat");
    let own = w[0]["instructions"] as f64;
    let stat = c.ok("stat");
    let summary: Value = stat
        .lines()
        .filter(|l| l.starts_with("{\"summary\""))
        .map(|l| serde_json::from_str(l).expect("stat --json summary"))
        .next()
        .unwrap_or_else(|| panic!("no stat summary in\n{stat}"));
    let counts = &summary["summary"]["counts"];
    let ins = counts["perf_user_instructions_total"]
        .as_f64()
        .expect("stat instructions:u");
    let cyc = counts["perf_user_cycles_total"]
        .as_f64()
        .expect("stat cycles:u");
    eprintln!("stat: instructions:u {ins} cycles:u {cyc}; the workload's own {own}");
    assert!(
        ins >= own,
        "stat's instructions:u {ins} miss part of the workload's {own}"
    );
    assert!(
        (cyc - ins).abs() <= 1e-6 * ins + STARTUP_SLACK,
        "stat: cycles:u {cyc}, expected instructions:u {ins}"
    );
}

/// How far a multiplexed per-cgroup count may be off the exact one: the
/// issue's 0.5%. Measured ±0.07% (2026-11-27). It was −1.4% … +0.1%
/// while a per-cgroup group too big for the PMU was opened: the kernel
/// stops a rotation's scheduling at the first flexible group that does
/// not fit, so the sets behind it had 1 to 5 turns of 4 ms in all and the
/// kernel time of those few turns (`:u` does not count it) weighed on
/// them; such a group is no longer opened (issue 27, plan within the
/// budget).
const MUX_LIMIT: f64 = 0.005;

/// Scenario 3: multiplexing on the real driver. Eight single-event sets of
/// `instructions:u` per cgroup (plus the same sets node-wide) share the 6
/// programmable counters (the workload counts itself on the cycle counter,
/// which under -icount equals its user-mode instructions): each scaled
/// per-cgroup count is within [`MUX_LIMIT`] of the workload's exact count,
/// each set's state is `multiplexed` and its exported running ratio is the
/// kernel's. A set of 7 can never be scheduled as one group on 6 counters:
/// it is split at plan time, node-wide and per cgroup, says so, and counts.
/// (A group that does not fit because another user took counters after it
/// was planned is scenario 7's.)
#[test]
fn multiplexed_counts_are_scaled_to_the_exact_count() {
    let _g = common::serial();
    let c = boot(
        "neoverse-n1",
        1,
        "mux.sh",
        &[file("mux.yaml"), file("mux8.yaml")],
    );
    let w = c.workloads("workload");
    // cycles-only: the truth is its user-mode cycles, equal to its
    // user-mode instructions under -icount (scenario 2 asserts it).
    let own = w[0]["cycles"] as f64;
    assert_eq!(
        w[0]["enabled"], w[0]["running"],
        "the workload's pinned counter must never be multiplexed: {:?}",
        w[0]
    );
    let (before, after) = (c.ok("metrics-before"), c.ok("metrics-after"));
    let mut report = Vec::new();
    let mut errors = Vec::new();
    for set in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        let fam = format!("perf_cgroup_mux_{set}_instructions_total");
        let v0 = sample(&before, &fam, "cgroup=\"wl\"").unwrap_or(0.0);
        let v1 = sample(&after, &fam, "cgroup=\"wl\"")
            .unwrap_or_else(|| panic!("no {fam} after the workload:\n{after}"));
        let lbl = format!("cgroup=\"wl\",set=\"mux_{set}\"");
        let en = sample(&after, "perf_cgroup_group_enabled_seconds_total", &lbl).expect("enabled");
        let run = sample(&after, "perf_cgroup_group_running_seconds_total", &lbl).expect("running");
        // The exported ratio is the kernel's over the window between the
        // two scrapes: the group times' deltas.
        let en0 = sample(&before, "perf_cgroup_group_enabled_seconds_total", &lbl).unwrap_or(0.0);
        let run0 = sample(&before, "perf_cgroup_group_running_seconds_total", &lbl).unwrap_or(0.0);
        let kernel_ratio = (run - run0) / (en - en0);
        let metric = format!("metric=\"{fam}\",cgroup=\"wl\"");
        let ratio = sample(&after, "perf_cgroup_counter_running_ratio", &metric)
            .unwrap_or_else(|| panic!("{fam}: no running ratio while multiplexed:\n{after}"));
        assert!(
            (ratio - kernel_ratio).abs() < 1e-6,
            "{fam}: exported running ratio {ratio}, the kernel's times give {kernel_ratio}"
        );
        let state = format!("{metric},state=\"multiplexed\"");
        assert_eq!(
            sample(&after, "perf_cgroup_counter_state", &state),
            Some(1.0),
            "{fam}: expected the state multiplexed:\n{after}"
        );
        let err = (v1 - v0 - own) / own;
        report.push(format!(
            "mux_{set}: {:.0} ({:+.3}%), running/enabled {:.3}",
            v1 - v0,
            err * 100.0,
            run / en
        ));
        errors.push((set, err, run, en));
    }
    let report = report.join("\n");
    eprintln!("{report}");
    for (set, err, run, en) in errors {
        assert!(
            err.abs() < MUX_LIMIT,
            "mux_{set}: the scaled count is {:+.3}% off the workload's exact {own} (limit {}%):\n{report}",
            err * 100.0,
            MUX_LIMIT * 100.0
        );
        assert!(
            run > 0.0 && run < 0.99 * en,
            "mux_{set}: running {run} s of enabled {en} s: expected it multiplexed:\n{report}"
        );
    }
    // The group of 7 is split at plan time, node-wide and per cgroup, and
    // says so; its parts count.
    let log = c.ok("log");
    assert!(
        log.contains("group larger than the PMU's free counters")
            && log.contains("set `huge` has 7 events"),
        "expected the node-wide group of 7 to be split at plan time, log:\n{log}"
    );
    assert!(
        log.contains("per-cgroup group split") && log.contains("set `huge`"),
        "expected the per-cgroup group of 7 to be split at plan time, log:\n{log}"
    );
    assert!(
        log.contains("6 general-purpose counters free"),
        "expected the measured budget (6 free) in the log:\n{log}"
    );
    eight_alone_run_six_eighths_of_the_time(&c);
    let mut huge = Vec::new();
    for i in 0..7 {
        let node = format!("perf_huge_{i}_instructions_total");
        let fam = format!("perf_cgroup_huge_{i}_instructions_total");
        let v0 = sample(&before, &fam, "cgroup=\"wl\"").unwrap_or(0.0);
        let v1 = sample(&after, &fam, "cgroup=\"wl\"")
            .unwrap_or_else(|| panic!("{fam}: the split group of 7 must count:\n{after}"));
        assert!(
            sample(&after, &node, "cpu=\"0\"").is_some_and(|v| v > 0.0),
            "{node}: the node-wide split group of 7 must count:\n{after}"
        );
        huge.push(format!("{i}: {:+.3}%", (v1 - v0 - own) / own * 100.0));
    }
    eprintln!("per-cgroup group of 7, split: {}", huge.join(", "));
}

/// The eight sets alone, node-wide: 8 groups on 6 counters each run
/// about 6/8 of the time (the kernel rotates them every 4 ms; 200
/// turns), and say `multiplexed`.
fn eight_alone_run_six_eighths_of_the_time(c: &Console) {
    let (b8, a8) = (c.ok("mux8-before"), c.ok("mux8-after"));
    for set in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        let lbl = format!("set=\"mux_{set}\"");
        let delta = |fam: &str| {
            let v1 = sample(&a8, fam, &lbl).unwrap_or_else(|| panic!("no {fam}{{{lbl}}}:\n{a8}"));
            v1 - sample(&b8, fam, &lbl).unwrap_or(0.0)
        };
        let ratio =
            delta("perf_group_running_seconds_total") / delta("perf_group_enabled_seconds_total");
        assert!(
            (ratio - 0.75).abs() < 0.05,
            "mux_{set} alone: running {ratio:.3} of the time, expected about 6/8 = 0.75:\n{a8}"
        );
        let metric = format!("metric=\"perf_mux_{set}_instructions_total\"");
        let state = format!("{metric},state=\"multiplexed\"");
        assert_eq!(
            sample(&a8, "perf_counter_states", &state),
            Some(1.0),
            "mux_{set} alone: expected its one CPU's counter multiplexed:\n{a8}"
        );
    }
}

/// The core PMU's measured budget in a `check --json`.
fn free_counters(check: &Value) -> Option<u64> {
    check["counters"]
        .as_array()?
        .iter()
        .find(|c| c["pmu"] == "armv8_pmuv3")?["free"]
        .as_u64()
}

/// Scenario 7: PMU health on the real driver (issue 27's proof). The
/// start-up self-test passes, with exact counts. `check`
/// measures 6 programmable counters free, and 5 while another process
/// holds one (pinned, CPU-wide). A group of 6, planned while all 6 were
/// free, never runs once the other user holds one: node-wide its members
/// are `never_ran` (their totals stand still, never a fabricated 0), per
/// cgroup they never ran at all, so they have no value, only the state.
#[test]
fn pmu_health_budget_drop_and_a_group_that_never_runs() {
    let _g = common::serial();
    let c = boot("neoverse-n1", 1, "health.sh", &[file("health.yaml")]);
    let st = c.json("self-test");
    let t = &st["self_test"][0];
    assert_eq!(
        (&t["pmu"], &t["result"]),
        (&Value::from("armv8_pmuv3"), &Value::from("passed")),
        "the start-up self-test on the real PMUv3 driver: {:#}",
        st["self_test"]
    );
    // Under -icount user cycles equal user instructions; the loop runs at
    // least 3 instructions per iteration (the test's floor).
    let (ins, cyc, it) = (
        t["instructions"].as_f64().unwrap_or(0.0),
        t["cycles"].as_f64().unwrap_or(0.0),
        t["iterations"].as_f64().unwrap_or(0.0),
    );
    assert!(
        ins >= 3.0 * it && (cyc - ins).abs() <= 0.01 * ins,
        "self-test counts on the real driver: {ins} instructions, {cyc} cycles for {it} iterations"
    );
    let free = c.json("check-free");
    let held = c.json("check-held");
    eprintln!("budget: {} then {}", free["counters"], held["counters"]);
    assert_eq!(
        free_counters(&free),
        Some(6),
        "check with the PMU free: expected 6 programmable counters free: {}",
        free["counters"]
    );
    assert_eq!(
        free_counters(&held),
        Some(5),
        "check while another process holds one counter: expected 5 free: {}",
        held["counters"]
    );
    let (at_start, before, after) = (
        c.ok("metrics-free"),
        c.ok("metrics-before"),
        c.ok("metrics-after"),
    );
    for i in 0..6 {
        let node = format!("perf_six_{i}_instructions_total");
        assert!(
            sample(&at_start, &node, "cpu=\"0\"").is_some_and(|v| v > 0.0),
            "{node}: the group of 6 counts while the PMU is free:\n{at_start}"
        );
        let (v0, v1) = (
            sample(&before, &node, "cpu=\"0\""),
            sample(&after, &node, "cpu=\"0\""),
        );
        assert_eq!(
            v0, v1,
            "{node}: a group that never ran must not move:\n{after}"
        );
        let state = format!("metric=\"{node}\",cpu=\"0\",state=\"never_ran\"");
        assert_eq!(
            sample(&after, "perf_counter_state", &state),
            Some(1.0),
            "{node}: expected never_ran while another user holds a counter:\n{after}"
        );
        let fam = format!("perf_cgroup_six_{i}_instructions_total");
        assert_eq!(
            sample(&after, &fam, "cgroup=\"wl\""),
            None,
            "{fam}: a group that never ran has no value, not 0:\n{after}"
        );
        let state = format!("metric=\"{fam}\",cgroup=\"wl\",state=\"never_ran\"");
        assert_eq!(
            sample(&after, "perf_cgroup_counter_state", &state),
            Some(1.0),
            "{fam}: expected never_ran:\n{after}"
        );
    }
}

/// Scenario 4: sampling (-smp 2). `top -e cycles:u -C 1` while the workload
/// runs pinned to CPU 1 (the exporter on CPU 0): the workload gets at least
/// 95% of the samples, and its sample count matches its instructions over
/// the period (user-mode cycles equal instructions under -icount; with two
/// CPUs sharing the instruction budget within 2%).
#[test]
fn top_gives_the_pinned_workload_its_samples() {
    let _g = common::serial();
    let c = boot("neoverse-n1", 2, "top.sh", &[]);
    let period: f64 = c
        .text
        .lines()
        .find_map(|l| l.strip_prefix("period="))
        .and_then(|p| p.trim().parse().ok())
        .expect("the scenario prints its period");
    let w = c.workloads("workload");
    let own = w[0]["instructions"] as f64;
    let top = c.json("top");
    let s = &top["summary"];
    assert_eq!(s["event"], "cycles:u", "{top:#}");
    assert_eq!(s["lost"], 0, "{top:#}");
    let total = s["samples"].as_f64().expect("samples");
    let entry = s["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["name"] == "workload")
        .unwrap_or_else(|| panic!("no workload entry in {top:#}"));
    let mine = entry["samples"].as_f64().expect("samples");
    let expected = own / period;
    eprintln!(
        "top: workload {mine} of {total} samples ({:.2}%), expected {expected:.0} ({own} instructions / {period})",
        100.0 * mine / total
    );
    assert!(
        mine >= 0.95 * total,
        "the pinned workload got {mine} of {total} samples, expected at least 95%"
    );
    assert!(
        (mine - expected).abs() <= 0.02 * expected + 2.0,
        "the workload's samples {mine}, expected {expected:.0} = its {own} instructions / period {period} (within 2%)"
    );
}

/// Scenario 6: CPU hotplug with the real driver (-smp 2). CPU 1 goes
/// offline and back between scrapes, with the workload running on each
/// online CPU in between: every scrape succeeds, no read fails, every
/// per-CPU counter only grows (CPU 1's series are absent while it is
/// offline and continue from their total when it returns), and CPU 1
/// counts again once back.
#[test]
fn hotplug_keeps_every_counter_monotonic() {
    let _g = common::serial();
    let c = boot("neoverse-n1", 2, "hotplug.sh", &[file("hotplug.yaml")]);
    c.ok("ready");
    c.ok("offline");
    c.ok("online");
    let mut last: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    let mut seen = Vec::new();
    for step in 1..=5 {
        let m = c.ok(&format!("scrape-{step}"));
        let cpus: Vec<&str> = ["0", "1"]
            .into_iter()
            .filter(|cpu| {
                sample(
                    &m,
                    "perf_user_instructions_total",
                    &format!("cpu=\"{cpu}\""),
                )
                .is_some()
            })
            .collect();
        seen.push(cpus.join(","));
        for l in m.lines() {
            if l.starts_with("perf_read_errors_total") {
                assert!(l.ends_with(" 0"), "scrape {step}: a read failed: {l}");
            }
            for fam in ["perf_user_instructions_total", "perf_user_cycles_total"] {
                if let Some(rest) = l.strip_prefix(fam) {
                    let (labels, v) = rest.rsplit_once(' ').expect("a sample");
                    let v: f64 = v.parse().expect("a value");
                    let key = format!("{fam}{labels}");
                    if let Some(&(at, before)) = last.get(&key) {
                        assert!(
                            v >= before,
                            "{key} went back from {before} (scrape {at}) to {v} (scrape {step})"
                        );
                    }
                    last.insert(key, (step, v));
                }
            }
        }
    }
    assert_eq!(
        seen,
        ["0,1", "0", "0", "0,1", "0,1"],
        "expected CPU 1's series absent only while it is offline (scrapes 2 and 3)"
    );
    let log = c.ok("log");
    assert!(
        log.contains(r#"msg="online CPUs changed" from=0-1 to=0"#)
            && log.contains(r#"msg="online CPUs changed" from=0 to=0-1"#),
        "expected the exporter to notice CPU 1 leave and return, log:\n{log}"
    );
    // CPU 1 counts again after returning: the workload ran on it between
    // scrapes 4 and 5.
    let (s4, s5) = (c.ok("scrape-4"), c.ok("scrape-5"));
    let cpu1 = |m: &str| sample(m, "perf_user_instructions_total", "cpu=\"1\"").unwrap_or(0.0);
    assert!(
        cpu1(&s5) - cpu1(&s4) >= 8e6,
        "CPU 1 counted {} instructions:u between scrapes 4 and 5, expected at least the workload's 8e6",
        cpu1(&s5) - cpu1(&s4)
    );
}
