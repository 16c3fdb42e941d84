//! The real binary's `list` and `check` commands, and its start-up errors.

use crate::common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_perf-exporter"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn list_on_this_vm_probes_for_real() {
    assert!(
        Path::new("/sys/bus/event_source/devices/software").exists(),
        "this test needs the live /sys with perf_events"
    );
    let o = run(&["list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
            .to_string()
    };
    assert!(line("msr/tsc/").ends_with("yes"), "{}", line("msr/tsc/"));
    assert!(line("cpu-clock").ends_with("yes"));
    assert!(line("context-switches").ends_with("yes"));
    assert!(
        line("cycles").contains("no: no core PMU"),
        "{}",
        line("cycles")
    );
    assert!(
        out.lines()
            .any(|l| l.contains(" tracepoint ") && l.ends_with("yes")),
        "a tracepoint must be available (is tracefs mounted?)\n{out}"
    );
    let last = out.lines().last().unwrap();
    assert!(
        last.ends_with("available") && last.contains(" of "),
        "{last}"
    );

    let o = run(&["list", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["probed"], true);
    let ev = |n: &str| entry(&v, "events", "name", n);
    assert_eq!(ev("msr/tsc/")["available"], true);
    assert_eq!(ev("cycles")["available"], false);
    assert_eq!(ev("cycles")["type"], 0);
    assert!(v["tracepoints"].as_u64().unwrap() > 100);
}

#[test]
fn list_of_a_fixture_is_not_probed_unless_simulated() {
    let skx = fixture("intel-skx");
    let v = json(&["list", "--json", "--path.sysfs", skx.to_str().unwrap()]);
    assert_eq!(v["probed"], false);
    let imc = entry(&v, "events", "name", "uncore_imc_0/cas_count_read/");
    assert_eq!(imc["available"], Value::Null);
    assert_eq!(imc["reason"], "not probed");
    assert_eq!(imc["config"], "0x304");
    let text = stdout(&run(&["list", "--path.sysfs", skx.to_str().unwrap()]));
    assert!(text.contains("not probed"));

    let o = run(&[
        "list",
        "--json",
        "--simulate",
        "--path.sysfs",
        skx.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(entry(&v, "events", "name", "cycles")["available"], true);
}

/// Issue 27: each metric's counter state after check's collection, its
/// counters in each state when any was judged.
fn assert_counter_state_keys(m: &Value) {
    let st = &m["counter_state"];
    let mut want = vec!["problem", "reason", "running_ratio", "state", "what_to_do"];
    // (a metric resolved without a kernel to probe may still fail to
    // open on the simulated PMU: then it is unavailable too)
    if st["state"] != "unavailable" {
        want.insert(0, "cpus");
        assert_eq!(
            keys(&st["cpus"]),
            vec![
                "counting",
                "implausible",
                "multiplexed",
                "never_ran",
                "stalled"
            ]
        );
    } else {
        assert!(st["problem"].is_string(), "{m}");
    }
    if m["status"] == "unavailable" {
        assert_eq!(st["state"], "unavailable", "{m}");
    }
    assert_eq!(keys(st), want, "{m}");
}

/// The top-level keys of `check --json` with the default config.
const CHECK_KEYS: [&str; 5] = [
    "counters",
    "cpu_identities",
    "derived",
    "metrics",
    "series_budget",
];

/// The default config's derived metrics in `check --json`, each with the
/// expression this host takes and every alternative tried.
fn assert_derived_keys(v: &Value) {
    let ds = v["derived"].as_array().expect("a derived array");
    assert!(!ds.is_empty(), "{v}");
    for d in ds {
        assert_eq!(keys(d), vec!["class", "expr", "name", "status", "tried"]);
        for t in d["tried"].as_array().unwrap() {
            assert_eq!(keys(t), vec!["event", "problem", "reason", "what_to_do"]);
        }
    }
}

#[test]
fn check_json_has_exactly_the_contract_keys() {
    let skx = fixture("intel-skx");
    let o = run(&["check", "--json", "--path.sysfs", skx.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(keys(&v), CHECK_KEYS);
    assert_derived_keys(&v);
    // A fixture without --simulate has no kernel to measure the counter budget on.
    assert_eq!(v["counters"], serde_json::json!([]));
    assert_eq!(keys(&v["series_budget"]), vec!["cpus", "families", "total"]);
    for f in v["series_budget"]["families"].as_array().unwrap() {
        assert_eq!(keys(f), vec!["family", "series"]);
    }
    for i in v["cpu_identities"].as_array().unwrap() {
        assert_eq!(keys(i), vec!["cpu", "identity", "pmu", "unknown"]);
    }
    let ms = v["metrics"].as_array().unwrap();
    for m in ms {
        assert_eq!(
            keys(m),
            vec![
                "class",
                "counter_state",
                "event",
                "instances",
                "metric",
                "partial",
                "status",
                "tried"
            ]
        );
        assert_counter_state_keys(m);
        for i in m["instances"].as_array().unwrap() {
            assert_eq!(
                keys(i),
                vec!["config", "config1", "config2", "cpus", "pmu", "scale", "type", "unit"]
            );
        }
        for t in m["tried"].as_array().unwrap() {
            assert_eq!(keys(t), vec!["event", "problem", "reason", "what_to_do"]);
        }
    }
    let get = |n: &str| ms.iter().find(|m| m["metric"] == n).unwrap().clone();
    let rd = get("perf_dram_read_bytes_total");
    assert_eq!(rd["status"], "resolved");
    assert_eq!(rd["event"], "uncore_imc_*/cas_count_read/");
    let i0 = &rd["instances"][0];
    assert_eq!(i0["pmu"], "uncore_imc_0");
    assert_eq!(i0["type"], 18);
    assert_eq!(i0["config"], "0x304");
    assert_eq!(i0["config1"], "0x0");
    assert_eq!(i0["cpus"], serde_json::json!([0, 2]));
    assert_eq!(i0["scale"], 64.0);
    assert_eq!(i0["unit"], "bytes");
    let cyc = get("perf_cpu_cycles_total");
    assert_eq!(cyc["status"], "resolved");
    assert_eq!(cyc["instances"][0]["type"], 0);

    let client = fixture("intel-client");
    let v: Value = serde_json::from_str(&stdout(&run(&[
        "check",
        "--json",
        "--path.sysfs",
        client.to_str().unwrap(),
    ])))
    .unwrap();
    let rd = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "perf_dram_read_bytes_total")
        .unwrap()
        .clone();
    assert_eq!(rd["status"], "fallback");
    assert_eq!(rd["event"], "uncore_imc/data_reads/");
    let tried = rd["tried"].as_array().unwrap();
    assert_eq!(tried.len(), 3);
    assert!(
        tried[0]["reason"].as_str().unwrap().contains("uncore_imc"),
        "{tried:?}"
    );
    assert_eq!(tried[2]["reason"], "selected");
    assert_eq!(tried[2]["problem"], Value::Null);
    assert_eq!(rd["class"], Value::Null);

    let vm = fixture("vm-no-pmu");
    let o = run(&["check", "--path.sysfs", vm.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "unavailable metrics are not an invalid config"
    );
    let t = stdout(&o);
    assert!(
        t.contains("perf_cpu_cycles_total") && t.contains("unavailable"),
        "{t}"
    );
    assert!(t.contains("no core PMU"), "{t}");
}

/// Issue 29: `check` gives the series budget of the config on the host (a
/// fixture here): series per family and in all, with the CPU count; the
/// JSON's total is the sum of its families, the text says the same.
#[test]
fn check_gives_the_series_budget() {
    let skx = fixture("intel-skx");
    let v = json(&["check", "--json", "--path.sysfs", skx.to_str().unwrap()]);
    let b = &v["series_budget"];
    assert_eq!(b["cpus"], 8);
    let families = b["families"].as_array().unwrap();
    let series = |name: &str| {
        families
            .iter()
            .find(|f| f["family"] == name)
            .unwrap_or_else(|| panic!("{name} in {b}"))["series"]
            .as_u64()
            .unwrap()
    };
    // The default sums the core sets per node: one series.
    assert_eq!(series("perf_cpu_cycles_total"), 1, "one per node");
    // Six memory controllers on each of two sockets.
    assert_eq!(series("perf_dram_read_bytes_total"), 12);
    let sum: u64 = families.iter().map(|f| f["series"].as_u64().unwrap()).sum();
    assert_eq!(b["total"].as_u64().unwrap(), sum);

    let o = run(&["check", "--path.sysfs", skx.to_str().unwrap()]);
    let t = stdout(&o);
    let line = format!("series budget: {sum} series on 8 CPUs (");
    assert!(t.contains(&line), "{t}");
    assert!(
        t.lines()
            .any(|l| l.trim_start().starts_with("perf_cpu_cycles_total")
                && l.trim_end().ends_with(" 1")),
        "{t}"
    );
}

/// The entry of `report[list]` whose `key` is `name` (a metric of
/// `check --json`, an event of `list --json`).
fn entry(report: &Value, list: &str, key: &str, name: &str) -> Value {
    report[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {report}"))
        .iter()
        .find(|m| m[key] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
        .clone()
}

/// Issue 27 item 3: `check` says each core PMU's free counters and who
/// holds the rest, with what to do, before the summary line: the
/// simulated Skylake-SP has 4 general-purpose counters and its procfs
/// says the NMI watchdog runs; a PMU that refuses every open is not
/// measured, and says so.
#[test]
fn check_text_says_the_counter_budget_and_what_to_do() {
    let procfs = crate::common::fixture_procfs("intel-skx");
    let p = procfs.to_str().expect("utf-8");
    let text = stdout(&simulated_check(
        "intel-skx",
        &["--path.procfs", p],
        "msr=EINVAL",
    ));
    let lines: Vec<&str> = text.lines().collect();
    let i = lines
        .iter()
        .position(|l| *l == "counters: cpu: 3 of 4 general-purpose counters free (CPU 0)")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        lines[i + 1],
        "    the NMI watchdog holds one of PMU cpu's counters (kernel.nmi_watchdog=1)"
    );
    assert!(
        lines[i + 2].starts_with("    what to do: set kernel.nmi_watchdog=0 to free one counter"),
        "{text}"
    );
    assert!(lines.last().unwrap().ends_with("failed)"), "{text}");
    // Issue 27: each metric's counter state after the collection, as perf
    // says it, with why and what to do (the simulated skx has 3 counters
    // free for 18 events that take one: each runs 1/6 of the time).
    let c = lines
        .iter()
        .position(|l| l.starts_with("perf_cpu_cycles_total "))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        lines[c + 2..c + 5].iter().map(|l| l.trim()).collect::<Vec<_>>(),
        [
            "state: multiplexed on 8 CPUs (10.34%)",
            "why: multiplexed: time-sliced with other groups; the value is scaled by enabled/running time",
            "what to do: fewer events per core PMU, or stop other users of the counters",
        ],
        "{text}"
    );
    assert!(text.contains("    state: <not supported>\n"), "{text}");
    let refused = stdout(&simulated_check("intel-skx", &[], "cpu=EINVAL"));
    assert!(
        refused.contains(
            "counters: cpu: not measured\n    the counters of PMU cpu could not be measured"
        ),
        "{refused}"
    );
}

/// `check ARGS --simulate --path.sysfs <fixture> --simulate.refuse REFUSE`.
fn simulated_check(fixture_name: &str, args: &[&str], refuse: &str) -> Output {
    simulated("check", fixture_name, args, refuse)
}

/// `CMD ARGS --simulate --path.sysfs <fixture> --simulate.refuse REFUSE`.
fn simulated(cmd: &str, fixture_name: &str, args: &[&str], refuse: &str) -> Output {
    let f = fixture(fixture_name);
    let sysfs = ["--simulate", "--path.sysfs", f.to_str().expect("utf-8")];
    run(&[&[cmd][..], args, &sysfs, &["--simulate.refuse", refuse]].concat())
}

/// Runs the binary, which must succeed, and parses its JSON output.
fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("JSON on stdout")
}

/// The metric `name` of a `check --json` report.
fn metric(report: &Value, name: &str) -> Value {
    entry(report, "metrics", "metric", name)
}

/// Defect 8: `check` tells "not on this platform" (an expected absence)
/// from "should be here but failed".
#[test]
fn check_tells_not_on_this_platform_from_failed() {
    let vm = fixture("vm-no-pmu");
    let v = json(&["check", "--json", "--path.sysfs", vm.to_str().unwrap()]);
    let get = |n: &str| metric(&v, n);
    let cyc = get("perf_cpu_cycles_total");
    assert_eq!(cyc["status"], "unavailable");
    assert_eq!(cyc["class"], "not_on_platform");
    assert_eq!(cyc["tried"][0]["problem"], "needs_hardware_pmu");
    assert!(
        cyc["tried"][0]["what_to_do"]
            .as_str()
            .unwrap()
            .contains("virtual PMU"),
        "{cyc}"
    );
    assert_eq!(get("perf_context_switches_total")["class"], Value::Null);

    // Refused opens on a host that has the PMU: failed, not absent.
    let o = simulated_check(
        "intel-skx",
        &["--json", "--simulate.refuse", "uncore_imc_0=EINVAL"],
        "cpu=EINVAL",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let m = |n: &str| metric(&v, n);
    let cyc = m("perf_cpu_cycles_total");
    assert_eq!(cyc["class"], "failed", "{cyc}");
    assert_eq!(cyc["tried"][0]["problem"], "pmu_refused", "{cyc}");
    // One IMC box refused: counted on the others, the refusal named.
    let rd = m("perf_dram_read_bytes_total");
    assert_eq!(rd["status"], "resolved");
    assert!(
        rd["partial"][0].as_str().unwrap().contains("uncore_imc_0"),
        "{rd}"
    );
    // Zen 4 has no RAPL DRAM domain: an expected absence, beside the
    // refused core PMU's failures.
    let text = stdout(&simulated_check("amd-zen4", &[], "cpu=EINVAL"));
    assert!(
        text.lines()
            .any(|l| l.starts_with("perf_energy_dram_joules_total ")
                && l.ends_with("(not on this platform)")),
        "{text}"
    );
    assert!(
        text.contains("(failed: should be countable here)")
            && text.contains("(not on this platform)")
            && text.contains("what to do: "),
        "{text}"
    );
    let last = text.lines().last().unwrap();
    assert!(
        last.contains("not on this platform,") && last.ends_with("failed)"),
        "{last}"
    );
}

/// Issue 24 item 15: a `--path.tracefs` that is not a tracefs was
/// classed `not_on_platform` ("no subsystem `irq`"); it is
/// `tracefs_missing`, a failure, naming the path and what to give.
#[test]
fn a_wrong_tracefs_path_is_tracefs_missing() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().display().to_string();
    let v = json(&["check", "--json", "--path.tracefs", &wrong]);
    let m = metric(&v, "perf_interrupts_total");
    assert_eq!(m["status"], "unavailable", "{m}");
    assert_eq!(m["class"], "failed", "{m}");
    assert_eq!(m["tried"][0]["problem"], "tracefs_missing", "{m}");
    assert_eq!(
        m["tried"][0]["reason"],
        format!("--path.tracefs {wrong} is not a tracefs: it has no events/ directory (tracepoint ids are read from it)"),
        "{m}"
    );
    assert_eq!(
        m["tried"][0]["what_to_do"],
        format!("give --path.tracefs the tracefs mount (usually /sys/kernel/tracing: `findmnt -t tracefs`), or mount tracefs there (`mount -t tracefs nodev {wrong}`)"),
        "{m}"
    );
}

/// Issue 24 item 15: `software/context-switches/` got an empty hint
/// ("write its format terms: ") and a platform blame; it is a config
/// mistake whose fix is the generic name.
#[test]
fn a_generic_event_through_the_software_pmu_is_a_config_mistake() {
    let cfg = file("cli/generic_through_software");
    let v = json(&["check", "--json", "--config.file", &cfg]);
    let cs = metric(&v, "perf_context_switches_total");
    assert_eq!(cs["class"], "failed", "{cs}");
    assert_eq!(cs["tried"][0]["problem"], "config", "{cs}");
    assert_eq!(
        cs["tried"][0]["reason"],
        "software has no sysfs events or format terms, so no event is named through it: write `context-switches` instead",
        "{cs}"
    );
    let x = metric(&v, "perf_x_total");
    assert_eq!(
        x["tried"][0]["reason"],
        "software has no event `no-such-event` (software names no events and has no format terms in sysfs)",
        "{x}"
    );
}

/// `tests/configs/<name>.yaml`'s path, as an argument.
fn file(name: &str) -> String {
    common::config_path(name).display().to_string()
}

fn config(dir: &Path, yaml: &str) -> String {
    let f = dir.join("c.yaml");
    std::fs::write(&f, yaml).unwrap();
    f.display().to_string()
}

/// `check` shows perf's modifiers: the winning spec as written
/// (`instructions:u`), each instance's exclude bits (text and JSON, where
/// the `exclude` key appears only with modifiers), and a PMU that refuses
/// them (the IMC, simulated) as unavailable with what to do; a mixed
/// chain is refused at load with the line. `list` names the modifiers.
#[test]
fn check_and_list_show_modifiers() {
    let cfg = file("cli/modifiers");
    let skx = fixture("intel-skx");
    let sim = ["--simulate", "--path.sysfs", skx.to_str().unwrap()];
    let o = run(&[&sim[..], &["check", "--config.file", &cfg]].concat());
    let text = stdout(&o);
    let line = |m: &str| {
        text.lines()
            .find(|l| l.starts_with(m))
            .unwrap_or_else(|| panic!("no {m} in:\n{text}"))
            .to_string()
    };
    assert!(
        line("instructions_user_total ").ends_with("instructions:u"),
        "{text}"
    );
    assert!(
        text.contains("exclude_kernel exclude_hv exclude_guest"),
        "{text}"
    );
    assert!(
        line("dram_read_user_bytes_total").contains("unavailable"),
        "{text}"
    );
    assert!(text.contains("drop the modifiers"), "{text}");
    let o = run(&[&sim[..], &["check", "--json", "--config.file", &cfg]].concat());
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let get = |n: &str| {
        v["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == n)
            .unwrap()
            .clone()
    };
    let u = get("instructions_user_total");
    assert_eq!(u["event"], "instructions:u");
    assert_eq!(
        u["instances"][0]["exclude"],
        serde_json::json!(["exclude_kernel", "exclude_hv", "exclude_guest"])
    );
    assert!(get("instructions_total")["instances"][0]
        .get("exclude")
        .is_none());
    assert_eq!(
        get("dram_read_user_bytes_total")["tried"][0]["problem"],
        "pmu_refused"
    );

    let mixed = file("cli/modifiers_mixed");
    let o = run(&[&sim[..], &["check", "--config.file", &mixed]].concat());
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains(":5:") && e.contains("a fallback never changes what a metric means"),
        "{e}"
    );
    let text = stdout(&run(&["list", "--path.sysfs", skx.to_str().unwrap()]));
    assert!(
        text.contains("modifiers: `u` (user), `k` (kernel)"),
        "{text}"
    );
}

/// `check` fails whenever `serve` would refuse the config (so CI can rely
/// on it), and with `--strict` whenever a metric is unavailable.
#[test]
fn check_fails_whenever_serve_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    // No metrics at all.
    let empty = config(dir.path(), "sets: []\n");
    let o = run(&["check", "--config.file", &empty]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("count nothing"), "{}", stderr(&o));
    let o = run(&[
        "--config.file",
        &empty,
        "--web.listen-address",
        "127.0.0.1:0",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("count nothing"), "{}", stderr(&o));

    // Only hardware events on this VM without a PMU: nothing countable,
    // live and on the fixture of such a VM.
    let hw = file("cli/cycles");
    let vm = fixture("vm-no-pmu");
    for extra in [&[][..], &["--path.sysfs", vm.to_str().unwrap()][..]] {
        let o = run(&[&["check", "--config.file", &hw][..], extra].concat());
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", stdout(&o));
        let e = stderr(&o);
        assert!(
            e.contains("nothing can be counted on this host") && e.contains("c_total"),
            "{e}"
        );
        let o = run(&[&["check", "--json", "--config.file", &hw][..], extra].concat());
        assert_eq!(o.status.code(), Some(1));
        let v: Value = serde_json::from_str(&stdout(&o)).expect("the report is still printed");
        assert_eq!(v["metrics"][0]["status"], "unavailable");
    }

    // Something countable: 0, unless --strict and something is unavailable.
    let o = run(&["check", "--path.sysfs", vm.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["check", "--strict", "--path.sysfs", vm.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--strict") && stderr(&o).contains("perf_cpu_cycles_total"),
        "{}",
        stderr(&o)
    );
    let sw = file("cli/context_switches");
    let o = run(&["check", "--strict", "--config.file", &sw]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A procfs root whose `self/status` says what the process holds.
fn procfs(dir: &Path, cap_eff: &str, seccomp: u8) -> String {
    let root = dir.join("proc");
    std::fs::create_dir_all(root.join("self")).unwrap();
    std::fs::create_dir_all(root.join("sys/kernel")).unwrap();
    std::fs::write(
        root.join("self/status"),
        format!("Name:\tperf-exporter\nUid:\t65534\t65534\t65534\t65534\nCapEff:\t{cap_eff}\nSeccomp:\t{seccomp}\nSeccomp_filters:\t1\n"),
    )
    .unwrap();
    std::fs::write(root.join("sys/kernel/perf_event_paranoid"), "2\n").unwrap();
    std::fs::write(root.join("sys/kernel/osrelease"), "6.8.0-45-generic\n").unwrap();
    root.display().to_string()
}

/// Defect 9: CAP_PERFMON held, every open refused with EACCES under a
/// seccomp filter: the seccomp profile is named, CAP_PERFMON is not asked
/// for. Without CAP_PERFMON the same refusal says to grant it.
#[test]
fn seccomp_not_cap_perfmon_when_perfmon_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let check = |procfs: &str| {
        simulated_check(
            "intel-skx",
            &["--json", "--path.procfs", procfs],
            "*=EACCES",
        )
    };
    // CAP_PERFMON is bit 38.
    let held = procfs(dir.path(), "0000004000000000", 2);
    let o = check(&held);
    assert_eq!(o.status.code(), Some(1), "nothing countable must fail");
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let t = &v["metrics"][0]["tried"][0];
    assert_eq!(t["problem"], "seccomp", "{t}");
    let reason = t["reason"].as_str().unwrap();
    assert!(
        reason.contains("Seccomp: 2") && reason.contains("errno 13"),
        "{reason}"
    );
    let todo = t["what_to_do"].as_str().unwrap();
    assert!(todo.contains("--security-opt seccomp="), "{todo}");
    let all = stdout(&o) + &stderr(&o);
    assert!(
        !all.contains("grant CAP_PERFMON") && !all.contains("setcap"),
        "a process holding CAP_PERFMON is told to grant it:\n{all}"
    );
    assert!(stderr(&o).contains("seccomp profile"), "{}", stderr(&o));

    // No seccomp filter: an LSM is the likely cause.
    let dir2 = tempfile::tempdir().unwrap();
    let v: Value =
        serde_json::from_str(&stdout(&check(&procfs(dir2.path(), "0000004000000000", 0)))).unwrap();
    let r = v["metrics"][0]["tried"][0]["reason"].as_str().unwrap();
    assert!(r.contains("LSM") && r.contains("Seccomp: 0"), "{r}");

    // No capability: that is missing privilege.
    let dir3 = tempfile::tempdir().unwrap();
    let v: Value =
        serde_json::from_str(&stdout(&check(&procfs(dir3.path(), "0000000000000000", 2)))).unwrap();
    let t = &v["metrics"][0]["tried"][0];
    assert_eq!(t["problem"], "privilege", "{t}");
    assert!(t["what_to_do"]
        .as_str()
        .unwrap()
        .contains("setcap cap_perfmon=ep"));
}

/// CAP_PERFMON held, one PMU refuses with EPERM while others open: the
/// kernel restricts those events; nobody is told to grant CAP_PERFMON.
#[test]
fn refused_with_cap_perfmon_is_a_restriction_not_missing_privilege() {
    let dir = tempfile::tempdir().unwrap();
    let held = procfs(dir.path(), "0000004000000000", 0);
    let o = simulated_check(
        "intel-skx",
        &["--json", "--path.procfs", &held],
        "cpu=EPERM",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cyc = &v["metrics"][0];
    assert_eq!(cyc["metric"], "perf_cpu_cycles_total");
    assert_eq!(cyc["class"], "failed");
    let t = &cyc["tried"][0];
    assert_eq!(t["problem"], "refused", "{t}");
    assert!(
        !stdout(&o).contains("grant CAP_PERFMON") && !stdout(&o).contains("setcap"),
        "{}",
        stdout(&o)
    );
    // `list` diagnoses the same way.
    let o = simulated(
        "list",
        "intel-skx",
        &["--json", "--path.procfs", &held],
        "cpu=EPERM",
    );
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cyc = entry(&v, "events", "name", "cycles");
    assert_eq!(cyc["available"], false);
    assert_eq!(cyc["problem"], "refused", "{cyc}");
}

/// As root (who holds CAP_PERFMON), a refused `ftrace:function` is not
/// "needs CAP_PERFMON": the kernel restricts that event here.
#[test]
fn as_root_a_refused_event_is_not_missing_cap_perfmon() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(
        status.lines().any(|l| l.starts_with("Uid:\t0\t")),
        "this test must run as root"
    );
    let f = file("cli/ftrace_function");
    let o = run(&["check", "--json", "--config.file", &f]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ft = &v["metrics"][0];
    assert_eq!(
        ft["status"], "unavailable",
        "ftrace:function opened as root: this kernel does not restrict it, so this test cannot show the reason given when it does (it needs a kernel that refuses ftrace:function to root, as this VM's does)"
    );
    let t = &ft["tried"][0];
    assert_eq!(t["problem"], "refused", "{t}");
    let all = format!("{} {}", t["reason"], t["what_to_do"]);
    assert!(
        !all.contains("needs CAP_PERFMON") && !all.contains("grant CAP_PERFMON"),
        "{all}"
    );
    assert!(all.contains("although CAP_PERFMON allows"), "{all}");
}

#[test]
fn invalid_config_fails_with_file_line_column() {
    let f = common::config_path("cli/invalid_event_typo");
    let o = run(&["check", "--config.file", f.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&format!("{}:5:", f.display())), "{e}");
    assert!(e.contains("did you mean `context-switches`"), "{e}");

    let f = common::config_path("cli/invalid_pmu_unclosed");
    let e = stderr(&run(&["check", "--config.file", f.to_str().unwrap()]));
    assert!(e.contains("closing `/`"), "{e}");

    let f = common::config_path("cli/invalid_key");
    let o = run(&["check", "--config.file", f.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(":3:"), "{}", stderr(&o));

    let o = run(&["check", "--config.file", "/nonexistent/perf.yaml"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("/nonexistent/perf.yaml"));
}

#[test]
fn unknown_pmu_event_suggests_and_lists() {
    let f = common::config_path("cli/cas_count_misspelled");
    let skx = fixture("intel-skx");
    let o = run(&[
        "check",
        "--json",
        "--config.file",
        f.to_str().unwrap(),
        "--path.sysfs",
        skx.to_str().unwrap(),
    ]);
    // Its one metric is unavailable: serve would refuse, so check fails.
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let reason = v["metrics"][0]["tried"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("did you mean `cas_count_read`"), "{reason}");
}

#[test]
fn serve_refuses_a_fixture_without_simulate_and_nothing_to_count() {
    let skx = fixture("intel-skx");
    let o = run(&["serve", "--path.sysfs", skx.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--simulate"), "{}", stderr(&o));

    // Only hardware events on a VM without a PMU: nothing at all to count.
    let f = common::config_path("cli/cycles");
    let o = run(&[
        "--config.file",
        f.to_str().unwrap(),
        "--web.listen-address",
        "127.0.0.1:0",
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("nothing can be counted") && e.contains("core PMU"),
        "{e}"
    );
}

/// Unmounts on drop, even when the test fails.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A DaemonSet mounts the host's sysfs elsewhere (`--path.sysfs=/host/sys`):
/// that is the live kernel too, so events are probed and served for real.
#[test]
fn sysfs_mounted_elsewhere_is_live() {
    let dir = tempfile::tempdir().unwrap();
    let st = Command::new("mount")
        .args(["-t", "sysfs", "sysfs"])
        .arg(dir.path())
        .status()
        .expect("mount(8) runs");
    assert!(
        st.success(),
        "mounting a sysfs needs root (this test must run as root)"
    );
    let _u = Unmount(dir.path().to_path_buf());
    let o = run(&[
        "list",
        "--json",
        "--path.sysfs",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["probed"], true, "a mounted sysfs is the live kernel");
    let tsc = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "msr/tsc/")
        .unwrap();
    assert_eq!(tsc["available"], true);
}

/// The soft RLIMIT_NOFILE is raised toward the hard limit when the plan
/// needs more fds (plus headroom) than the soft limit allows.
#[test]
fn soft_fd_limit_is_raised_toward_the_hard_limit() {
    let mut child = Command::new("prlimit")
        .args(["--nofile=64:4096", "--"])
        .arg(env!("CARGO_BIN_EXE_perf-exporter"))
        .args(["--web.listen-address", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prlimit(1) from util-linux runs");
    let pid = child.id();
    let mut soft = None;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap_or("")
            .to_string();
        let v: Vec<&str> = line.split_whitespace().collect();
        if let Some(s) = v.get(3).and_then(|s| s.parse::<u64>().ok()) {
            if s != 64 {
                soft = Some((s, v.get(4).and_then(|h| h.parse::<u64>().ok())));
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let (soft, hard) = soft.expect("the soft limit stayed at 64");
    assert!(soft > 64 && soft <= 4096, "soft {soft}");
    assert_eq!(hard, Some(4096));
}

/// `check` on `yaml`: not a success, no panic (exit 1), and stderr.
fn refused_by_check(yaml: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let f = config(dir.path(), yaml);
    let o = run(&["check", "--config.file", &f]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    (f, e)
}

const SW_SET: &str = crate::config!("cli/sw_set");

#[test]
fn hostile_names_and_sampling_sections_are_refused_at_load() {
    // A name as wide as a format width (it used to panic `check`).
    let long = format!("perf_{}_total", "x".repeat(65_536));
    let (f, e) = refused_by_check(&format!(
        "sets:\n  - name: s\n    events:\n      - metric: {long}\n        event: cpu-clock\n"
    ));
    assert!(e.contains(&format!("{f}:4:")), "{e}");
    assert!(e.contains("longer than the 200 allowed"), "{e}");
    assert!(e.len() < 2000, "the error does not echo the name: {e}");
    // The sampling section's own families.
    for own in [
        "perf_sampled_events_total",
        "perf_ring_lost_records_total",
        "perf_ring_throttle_events_total",
        "perf_event_unavailable_info_total",
    ] {
        let (f, e) = refused_by_check(&format!(
            "sets:\n  - name: s\n    events:\n      - metric: {own}\n        event: cpu-clock\nsampling: {{}}\n"
        ));
        assert!(e.contains(&format!("{f}:4:")), "{own}: {e}");
        assert!(e.contains("collides with the exporter's own"), "{own}: {e}");
    }
    // The sampled event, and the ring's size.
    for (event, want) in [
        ("bogus", "unknown event `bogus`"),
        ("\"\"", "empty event spec"),
    ] {
        let (f, e) = refused_by_check(&format!("{SW_SET}sampling:\n  event: {event}\n"));
        assert!(e.contains(&format!("{f}:7:")), "{event}: {e}");
        assert!(e.contains(want), "{event}: {e}");
    }
    // Well-formed, but not on this host: `check` says where.
    let (f, e) = refused_by_check(&format!("{SW_SET}sampling:\n  event: nosuchpmu/cycles/\n"));
    assert!(e.contains(&format!("{f}:7:")), "{e}");
    assert!(e.contains("cannot be sampled on this host"), "{e}");
    let (f, e) = refused_by_check(&format!("{SW_SET}sampling:\n  ring_pages: 65536\n"));
    assert!(e.contains(&format!("{f}:7:")), "{e}");
    assert!(e.contains("from 1 to 512"), "{e}");
}

/// The exporter `bin` (a copy any user may execute) with `args`, to run
/// as uid 65534 with no capability (`setpriv`).
fn nobody(bin: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
    ])
    .arg(bin)
    .args(args)
    .current_dir("/");
    c
}

/// [`nobody`]'s output.
fn as_nobody(bin: &Path, args: &[&str]) -> Output {
    nobody(bin, args).output().expect("run setpriv")
}

/// Issue 28 item 17: misleading reasons without privilege. `stat` and
/// `top` say the privilege problem (what this process holds,
/// `perf_event_paranoid`, `CAP_PERFMON` to grant) before anything else,
/// not a missing PMU; `top -e msr/tsc/` says the privilege problem and
/// that msr cannot sample anyway; out-of-range `-c` and `--ring-pages`
/// are refused as such, not as a PMU's refusal; `stat` and `top` whose
/// reader leaves (`| head`) exit 0 without a word.
#[test]
fn without_privilege_stat_and_top_say_so() {
    common::require_root();
    common::require_tool("setpriv");
    let paranoid = common::paranoid();
    assert!(
        paranoid > 0,
        "kernel.perf_event_paranoid is {paranoid}: any user may count system-wide here, so this test cannot show what happens without privilege (set it to 2)"
    );
    let (_dir, bin) = common::world_executable_exporter();
    let said = format!("euid=65534 CAP_PERFMON=no CAP_SYS_ADMIN=no perf_event_paranoid={paranoid}");
    let o = as_nobody(&bin, &["stat", "-d", "1s"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains(&format!("nothing can be counted on this host: {said}")),
        "{e}"
    );
    assert!(e.contains("system-wide counting is NOT allowed"), "{e}");
    let perm = e.find("permission denied").unwrap_or_else(|| panic!("{e}"));
    if let Some(pmu) = e.find("no core PMU") {
        assert!(
            perm < pmu,
            "the missing PMU is said before the privilege problem: {e}"
        );
    }
    for (args, event) in [
        (&["top", "-d", "1s"][..], "cpu-clock"),
        (&["top", "-e", "cpu-clock", "-d", "1s"][..], "cpu-clock"),
    ] {
        let o = as_nobody(&bin, args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.starts_with(&format!(
                "perf-exporter: top: cannot sample {event}: open {event} on PMU software, CPU "
            )),
            "{args:?}: {e}"
        );
        assert!(e.contains(&said), "{args:?}: {e}");
        assert!(e.contains("grant CAP_PERFMON"), "{args:?}: {e}");
    }
    if Path::new("/sys/bus/event_source/devices/msr/events/tsc").exists() {
        let o = as_nobody(&bin, &["top", "-e", "msr/tsc/", "-d", "1s"]);
        let e = stderr(&o);
        assert!(
            e.contains("cannot sample msr/tsc/: open msr/tsc/ on PMU msr"),
            "{e}"
        );
        assert!(e.contains(&said), "{e}");
        assert!(e.contains("PMU msr counts but cannot sample"), "{e}");
        assert!(!e.contains("invalid encoding"), "{e}");
    }
    let o = as_nobody(&bin, &["top", "-c", "18446744073709551615", "-d", "1s"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("18446744073709551615 is not in 1..=9223372036854775807"),
        "{e}"
    );
    let o = as_nobody(&bin, &["top", "--ring-pages", "65536", "-d", "1s"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("`65536` is not a power of two from 1 to 512"),
        "{e}"
    );
    assert!(!e.contains("permission"), "{e}");
    // Piped into a reader that leaves after a line (the simulated PMU:
    // no privilege needed).
    let f = fixture("vm-no-pmu");
    let f = f.to_str().expect("utf-8 path");
    for cmd in ["stat", "top"] {
        let mut c = nobody(
            &bin,
            &[
                cmd,
                "--simulate",
                "--path.sysfs",
                f,
                "-I",
                "100ms",
                "-d",
                "20s",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
        let mut out = std::io::BufReader::new(c.stdout.take().expect("stdout"));
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).expect("a line");
        assert!(!line.is_empty(), "{cmd}: no output");
        drop(out);
        let o = c.wait_with_output().expect("wait");
        let e = stderr(&o);
        assert!(o.status.success(), "{cmd} | head: {:?} {e}", o.status);
        assert!(
            !e.contains("Broken pipe") && !e.contains("panicked"),
            "{cmd}: {e}"
        );
    }
}

/// Issue 27: `--collector.self-test` runs a calibrated loop counted
/// through the simulated kernel's counters for its thread: it passes on
/// the default simulated PMU, fails on a fake guest PMU that counts 395
/// events per second (`--simulate.guest-rate`), and is skipped where
/// there are no hardware counters. Without the flag, `check` says nothing
/// of it.
#[test]
fn check_runs_the_self_test_through_the_simulated_kernel() {
    let skx = fixture("intel-skx");
    let skx = skx.to_str().expect("utf-8");
    let check = |more: &[&str]| {
        let o = run(&[&["check", "--simulate", "--path.sysfs", skx][..], more].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("self-test: "))
            .take_while(|l| !l.starts_with("series budget: "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(lines(&check(&[])), Vec::<String>::new());
    assert_eq!(
        lines(&check(&["--collector.self-test"])),
        ["self-test: cpu: passed on CPU 0 (3000000 iterations: 13500000 instructions, 9000000 cycles in 6.000 ms)"]
    );
    let guest = ["--collector.self-test", "--simulate.guest-rate", "cpu=395"];
    assert_eq!(
        lines(&check(&guest)),
        [
            "self-test: cpu: failed on CPU 0: the self-test's calibrated loop on CPU 0 was not counted as it ran by PMU cpu: 2 instructions counted for 3000000 iterations of a loop of at least 3 instructions each, expected at least 4500000",
            "    what to do: do not take PMU cpu's counts on this host as measurements: on a VM the hypervisor's virtual PMU does not count what the guest runs (give the VM a working virtual PMU: KVM/QEMU `-cpu host,pmu=on`, a bare-metal or full-host instance type); compare with `perf stat -e instructions:u,cycles:u` of a busy loop, and report it with the CPU model and hypervisor",
        ]
    );
    let v = json(
        &[
            &["check", "--json", "--simulate", "--path.sysfs", skx][..],
            &guest,
        ]
        .concat(),
    );
    assert_eq!(
        v["self_test"],
        serde_json::json!([{
            "pmu": "cpu",
            "cpu": 0,
            "result": "failed",
            "iterations": 3000000,
            "instructions": null,
            "cycles": null,
            "problem": "self_test_failed",
            "reason": "the self-test's calibrated loop on CPU 0 was not counted as it ran by PMU cpu: 2 instructions counted for 3000000 iterations of a loop of at least 3 instructions each, expected at least 4500000",
            "what_to_do": "do not take PMU cpu's counts on this host as measurements: on a VM the hypervisor's virtual PMU does not count what the guest runs (give the VM a working virtual PMU: KVM/QEMU `-cpu host,pmu=on`, a bare-metal or full-host instance type); compare with `perf stat -e instructions:u,cycles:u` of a busy loop, and report it with the CPU model and hypervisor",
        }])
    );
    let no_pmu = fixture("vm-no-pmu");
    let v = json(&[
        "check",
        "--json",
        "--simulate",
        "--path.sysfs",
        no_pmu.to_str().expect("utf-8"),
        "--collector.self-test",
    ]);
    assert_eq!(v["self_test"][0]["result"], "skipped");
    assert_eq!(
        v["self_test"][0]["reason"],
        "no hardware counters (no core PMU)"
    );
    // Without the flag the JSON has no `self_test` (the goldens stand).
    let v = json(&["check", "--json", "--simulate", "--path.sysfs", skx]);
    assert_eq!(v.get("self_test"), None);
}
