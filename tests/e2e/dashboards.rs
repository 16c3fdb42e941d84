//! Every query of the Grafana dashboards (grafana/dashboards/*.json) and every
//! recording rule and alert (grafana/rules/perf-exporter.rules.yml), run on a
//! real Prometheus 2.53 that scraped the real exporter running `--simulate`.
//!
//! * Node and cluster dashboards, node-level rules and alerts: four sysfs
//!   fixtures at once, intel-skx, amd-zen4, amd-zen3 (DRAM total only) and
//!   vm-no-pmu (no hardware counters), one job, four instances.
//! * Pods dashboard and per-pod rules: intel-skx, amd-zen4 and vm-no-pmu,
//!   each paired with a simulated Kubernetes cgroup tree (`cgroups.preset:
//!   kubernetes`, containers counted too), and a real node_exporter serving
//!   `kube_pod_info` from its textfile collector, standing in for
//!   kube-state-metrics (every pod but one, which the rules must keep with
//!   its `pod_uid` only).
//!
//! * The top-down row of the node dashboard and the top-down rules: intel-hybrid
//!   (Intel perf metrics on `cpu_core`; the plain `topdown-*` counters of
//!   `cpu_atom` are families of their own), amd-zen4 (pipeline utilisation), intel-skx (the classic
//!   formula) and arm-neoverse-n1 (stall cycles); the level-1 shares must add
//!   up to 1 on every node with slots.
//!
//! Dashboard variables are substituted the way Grafana does for Prometheus:
//! `$job`, `$instance`, `$namespace`, `$pod` (regex-escaped; "All" is the
//! variable's allValue), `$__rate_interval`. Each query must return data on
//! some fixture; where it returns nothing, every node must lack
//! (perf_event_available == 0) one of the metrics it reads and the panel must
//! say so (noValue). IPC, bandwidth and ratio panels must fall in plausible
//! ranges.

use crate::common;

use common::{exporter, fixture, repo_root, server_binary, Proc};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

const JOB: &str = "perf-exporter";
const FIXTURES: [&str; 4] = ["intel-skx", "amd-zen4", "amd-zen3", "vm-no-pmu"];
/// `$__rate_interval` with a 1 s scrape interval (Grafana: at least four scrapes).
const RATE_INTERVAL: &str = "5s";
/// How long to wait for enough scrapes and rule evaluations.
const WARM_UP: Duration = Duration::from_secs(45);
/// The fixtures the pods test pairs with the simulated Kubernetes tree.
const POD_FIXTURES: [&str; 3] = ["intel-skx", "amd-zen4", "vm-no-pmu"];
/// A cgroup v2 tree in the Kubernetes layout (cgdisc's fixtures).
const KUBERNETES_TREE: &str = "tests/fixtures/cgroup/kubernetes-systemd";
/// The per-pod recording rules (checked by the pods test only).
const POD_RULE_PREFIX: &str = "namespace_pod:";
/// The node dashboard's top-down row and the top-down rules (checked by the
/// top-down test only, on the fixtures that count top-down).
const TOPDOWN_ROW: &str = "Top-down (level 1)";
/// The counter budget's family: `serve --simulate` models no counter
/// budget (an unbounded PMU, so the simulated nodes never multiplex), so
/// nothing is measured and the panels that read it have no data here; the
/// family is tested on the simulated PMU with a budget (the sim suite's
/// `counter_budget`) and in `check --json`'s goldens.
const BUDGET_FAMILY: &str = "perf_pmu_counters";
const TOPDOWN_RULES: &str = "perf_topdown_";
/// The level-2 shares and the E-cores' level-1 shares, with their values
/// on the simulated intel-hybrid, intel-skx and amd-zen4 (`None`: no
/// series there). intel-hybrid (src/perf/sim/accept.rs): the P-cores'
/// metric events in 255ths of their slots, `INT_MISC.UOP_DROPPING` 1e6/s
/// of 1.2e10 slots/s; the E-cores' categories of 5 slots a cycle.
/// intel-skx and amd-zen4: the hand-computed values of the sim suite's
/// `topdown_l2` tests (Skylake's and Zen 4's level-2 formulas over the
/// simulated rates). Checked by the top-down test only.
const LEVEL_2_SHARES: [(&str, f64, Option<f64>, Option<f64>); 18] = [
    (
        "instance:perf_frontend_bound_latency:rate5m",
        30.0 / 255.0 - 1e6 / 1.2e10,
        Some(0.1),
        Some(0.1),
    ),
    (
        "instance:perf_frontend_bound_bandwidth:rate5m",
        21.0 / 255.0,
        Some(0.1),
        Some(0.1),
    ),
    (
        "instance:perf_bad_speculation_mispredicts:rate5m",
        20.0 / 255.0,
        Some(0.16),
        Some(0.05),
    ),
    (
        "instance:perf_bad_speculation_pipeline_restarts:rate5m",
        6.0 / 255.0 + 1e6 / 1.2e10,
        Some(0.04),
        Some(0.05),
    ),
    (
        "instance:perf_backend_bound_memory:rate5m",
        40.0 / 255.0,
        Some(0.05),
        Some(0.15),
    ),
    (
        "instance:perf_backend_bound_cpu:rate5m",
        36.0 / 255.0,
        Some(0.05),
        Some(0.1),
    ),
    (
        "instance:perf_retiring_heavy_operations:rate5m",
        20.0 / 255.0,
        Some(0.15),
        None,
    ),
    (
        "instance:perf_retiring_light_operations:rate5m",
        82.0 / 255.0,
        Some(0.35),
        None,
    ),
    ("instance:perf_atom_frontend_bound:rate5m", 0.25, None, None),
    ("instance:perf_atom_bad_speculation:rate5m", 0.1, None, None),
    ("instance:perf_atom_backend_bound:rate5m", 0.25, None, None),
    ("instance:perf_atom_retiring:rate5m", 0.4, None, None),
    // The E-cores' level 2 (perf's `cpu_atom` formulas over the simulated
    // Gracemont raw events; atom_backend_bound_memory and _cpu read
    // `min()`, no rule: the exporter's gauges).
    (
        "instance:perf_atom_frontend_bound_latency:rate5m",
        0.15,
        None,
        None,
    ),
    (
        "instance:perf_atom_frontend_bound_bandwidth:rate5m",
        0.1,
        None,
        None,
    ),
    (
        "instance:perf_atom_bad_speculation_mispredicts:rate5m",
        0.06,
        None,
        None,
    ),
    (
        "instance:perf_atom_bad_speculation_pipeline_restarts:rate5m",
        0.04,
        None,
        None,
    ),
    ("instance:perf_atom_base:rate5m", 0.3, None, None),
    ("instance:perf_atom_ms_uops:rate5m", 0.1, None, None),
];
const TOPDOWN_FIXTURES: [&str; 6] = [
    "intel-hybrid",
    "amd-zen4",
    "intel-skx",
    "arm-neoverse-n1",
    "arm-neoverse-n2",
    "arm-neoverse-v2",
];
/// The Arm fixtures with slot events: their level-1 shares are perf's Arm
/// formulas (the derived `frontend_bound` .. `retiring` rules and the
/// panel's Arm alternative), not the `perf_topdown_*_slots` families.
const ARM_SLOT_FIXTURES: [&str; 2] = ["arm-neoverse-n2", "arm-neoverse-v2"];
/// The level-1 shares, which add up to 1 where a node counts slots.
const TOPDOWN_SHARES: &str = "instance:perf_topdown_(retiring|bad_speculation|frontend_bound|backend_bound|smt_contention):ratio_rate5m";

/// An instant query; panics on any error (with the query).
fn query(prom: &Proc, q: &str) -> Vec<Value> {
    let path = format!("/api/v1/query?query={}", common::urlencode(q));
    let r = prom.get(&path);
    assert_eq!(r.status, 200, "query {q}: {}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{q}: {e}: {}", r.body));
    assert_eq!(v["status"], "success", "query {q}: {}", r.body);
    match v["data"]["resultType"].as_str() {
        Some("vector") => v["data"]["result"].as_array().cloned().unwrap_or_default(),
        Some("scalar") => vec![serde_json::json!({"metric": {}, "value": v["data"]["result"]})],
        other => panic!("query {q}: unexpected result type {other:?}"),
    }
}

fn value(sample: &Value) -> f64 {
    let s = sample["value"][1]
        .as_str()
        .unwrap_or_else(|| panic!("no value in {sample}"));
    match s {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or_else(|e| panic!("{s}: {e}")),
    }
}

/// How Grafana interpolates a multi-value/regex variable for Prometheus:
/// regex metacharacters escaped, then escaped again for the PromQL string.
fn regex_escape(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push_str("\\\\");
        }
        out.push(c);
    }
    out
}

/// Substitutes `$__rate_interval`, `$job` and `vars` (name, value already
/// escaped). `label_replace`'s `$1` (in a replacement such as
/// `"socket $1"`) stays, as Grafana leaves it.
fn substitute(expr: &str, vars: &[(&str, &str)]) -> String {
    let mut q = expr
        .replace("$__rate_interval", RATE_INTERVAL)
        .replace("$job", &regex_escape(JOB));
    for (name, value) in vars {
        q = q.replace(&format!("${name}"), value);
    }
    assert!(
        !q.replace("$1", "").contains('$'),
        "unsubstituted variable in {q}"
    );
    q
}

/// The `perf_...` metric names an expression reads.
fn metrics_in(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(pos) = expr[i..].find("perf_") {
        let start = i + pos;
        let ok_start = start == 0
            || !(b[start - 1].is_ascii_alphanumeric()
                || b[start - 1] == b'_'
                || b[start - 1] == b':');
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        if ok_start {
            out.insert(expr[start..end].to_string());
        }
        i = end;
    }
    out
}

struct Panel {
    dashboard: String,
    /// The title of the row it is in (empty before the first row).
    row: String,
    title: String,
    unit: String,
    no_value: Option<String>,
    exprs: Vec<(String, String)>, // (refId, expr)
}

fn load_panels(file: &str) -> (Vec<Panel>, Value) {
    let path = repo_root().join("grafana/dashboards").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dash: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut flat = Vec::new();
    let mut row = String::new();
    for p in dash["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            row = p["title"].as_str().unwrap_or("").to_string();
            let nested = p["panels"].as_array().cloned().unwrap_or_default();
            flat.extend(nested.into_iter().map(|n| (row.clone(), n)));
        } else {
            flat.push((row.clone(), p.clone()));
        }
    }
    let panels = flat
        .iter()
        .map(|(row, p)| Panel {
            dashboard: file.to_string(),
            row: row.clone(),
            title: p["title"].as_str().unwrap_or("").to_string(),
            unit: p["fieldConfig"]["defaults"]["unit"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            no_value: p["fieldConfig"]["defaults"]["noValue"]
                .as_str()
                .map(str::to_string),
            exprs: p["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .map(|t| {
                    (
                        t["refId"].as_str().unwrap_or("").to_string(),
                        t["expr"].as_str().expect("expr").to_string(),
                    )
                })
                .collect(),
        })
        .collect();
    (panels, dash)
}

/// The plausible range of a panel's values on a simulated or real machine.
fn plausible(p: &Panel) -> Option<(f64, f64)> {
    if p.title.contains("IPC") {
        // Real workloads run at 0.2-5 instructions per cycle; the simulated PMU at 1.5.
        return Some((0.5, 4.0));
    }
    match p.unit.as_str() {
        // DRAM bandwidth of a node or socket: 1 MB/s to 1 TB/s.
        "Bps" | "binBps" => Some((1e6, 1e12)),
        "percentunit" => Some((0.0, 1.0 + 1e-9)),
        _ => None,
    }
}

/// A real Prometheus scraping `jobs` (name, targets) every second, with the
/// rules loaded.
fn prometheus(dir: &Path, jobs: &[(&str, Vec<String>)]) -> Proc {
    let rules = repo_root().join("grafana/rules/perf-exporter.rules.yml");
    let mut cfg = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n  - '{}'\nscrape_configs:\n",
        rules.display()
    );
    for (job, targets) in jobs {
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        cfg.push_str(&format!(
            "  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ));
    }
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, cfg).expect("write prometheus.yml");
    let args: Vec<OsString> = vec![
        format!("--config.file={}", file.display()).into(),
        format!("--storage.tsdb.path={}", dir.join("data").display()).into(),
    ];
    Proc::start(
        "prometheus",
        &server_binary("PROMETHEUS"),
        &args,
        "--web.listen-address",
    )
}

/// Polls `ready` (every 500 ms) until it says nothing is missing, or fails
/// after [`WARM_UP`] with what it said and Prometheus's output.
fn warm_up(prom: &mut Proc, mut missing: impl FnMut(&Proc) -> Option<String>) {
    let deadline = Instant::now() + WARM_UP;
    loop {
        prom.assert_running();
        let Some(what) = missing(prom) else { return };
        assert!(
            Instant::now() < deadline,
            "after {WARM_UP:?}: {what}\nprometheus output:\n{}",
            prom.output()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Enough scrapes of every exporter for rate() over RATE_INTERVAL.
fn scraped(prom: &Proc, n: usize) -> Option<String> {
    let scrapes = query(
        prom,
        &format!("count_over_time(up{{job=\"{JOB}\"}}[1m]) >= 7"),
    );
    (scrapes.len() != n).then(|| format!("{} of {n} targets scraped 7 times", scrapes.len()))
}

/// Which metrics each node (by fixture) cannot count, on any of its PMUs.
fn unavailable<'a>(
    prom: &Proc,
    fixture_of: &BTreeMap<String, &'a str>,
) -> BTreeMap<&'a str, BTreeSet<String>> {
    let out = unavailable_of(prom, fixture_of);
    assert!(
        out["vm-no-pmu"].contains("perf_cpu_cycles_total"),
        "{out:?}"
    );
    out
}

/// [`unavailable`] without the check that the VM lacks cycles.
fn unavailable_of<'a>(
    prom: &Proc,
    fixture_of: &BTreeMap<String, &'a str>,
) -> BTreeMap<&'a str, BTreeSet<String>> {
    let mut out: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for r in query(
        prom,
        &format!("min by (instance, metric) (perf_event_available{{job=\"{JOB}\"}}) == 0"),
    ) {
        let inst = r["metric"]["instance"].as_str().expect("instance");
        out.entry(fixture_of[inst])
            .or_default()
            .insert(r["metric"]["metric"].as_str().expect("metric").to_string());
    }
    out
}

/// One variable selection of a dashboard: the substitutions and the
/// fixtures of the instances it selects.
struct Selection<'a> {
    vars: Vec<(&'static str, String)>,
    fixtures: Vec<&'a str>,
}

/// Runs every query of `panels` under each selection; records problems in
/// `failures`; returns how many queries ran.
fn check_panels(
    prom: &Proc,
    panels: &[Panel],
    selections: &[Selection],
    unavailable: &BTreeMap<&str, BTreeSet<String>>,
    failures: &mut Vec<String>,
) -> usize {
    let mut checked = 0;
    for p in panels {
        for (ref_id, expr) in &p.exprs {
            let mut any_data = false;
            for sel in selections {
                let vars: Vec<(&str, &str)> =
                    sel.vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let q = substitute(expr, &vars);
                let res = query(prom, &q);
                checked += 1;
                let fixtures = &sel.fixtures;
                let what = format!("{} / {} / {ref_id} on {fixtures:?}", p.dashboard, p.title);
                if res.is_empty() {
                    // Allowed only where the metrics are missing, and the panel says so.
                    // A per-cgroup metric is counted with its node-level encoding.
                    let read: BTreeSet<String> = metrics_in(expr)
                        .iter()
                        .map(|m| m.replacen("perf_cgroup_", "perf_", 1))
                        .collect();
                    // An availability table is empty exactly where
                    // every configured metric is counted.
                    let availability = read.contains("perf_event_available");
                    let explained = fixtures.iter().all(|f| match unavailable.get(f) {
                        None => availability,
                        Some(u) => read.iter().any(|m| u.contains(m)),
                    });
                    if !explained {
                        failures.push(format!("{what}: no data, yet every metric it reads ({read:?}) is counted\n  {q}"));
                    }
                    if p.no_value.is_none() {
                        failures.push(format!("{what}: no data and no noValue text"));
                    }
                    continue;
                }
                any_data = true;
                for r in &res {
                    let v = value(r);
                    if v.is_nan() || v.is_infinite() {
                        failures.push(format!("{what}: {v} in {r}\n  {q}"));
                    } else if let Some((lo, hi)) = plausible(p) {
                        if !(lo..=hi).contains(&v) {
                            failures.push(format!(
                                "{what}: {v} outside the plausible [{lo}, {hi}] ({r})\n  {q}"
                            ));
                        }
                    }
                }
            }
            if !any_data {
                failures.push(format!(
                    "{} / {} / {ref_id}: no data on any fixture\n  {expr}",
                    p.dashboard, p.title
                ));
            }
        }
    }
    checked
}

/// The recording rules' names, in file order.
fn records() -> Vec<String> {
    let rules = repo_root().join("grafana/rules/perf-exporter.rules.yml");
    let text = std::fs::read_to_string(&rules).expect("read rules");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .map(str::to_string)
        .collect()
}

/// The plausible range of a recording rule's values.
fn plausible_record(rec: &str, v: f64) -> bool {
    if rec.contains("_ipc:") {
        (0.5..=4.0).contains(&v)
    } else if rec.contains("_cpi:") {
        (0.25..=2.0).contains(&v)
    } else if rec.contains("bytes") {
        (1e6..=1e12).contains(&v)
    } else if rec.contains("ratio") {
        (0.0..=1.0 + 1e-9).contains(&v)
    } else {
        v.is_finite() && v >= 0.0
    }
}

/// Each recording rule records a plausible value for the nodes that count
/// its inputs.
fn check_records(
    prom: &Proc,
    records: &[String],
    fixture_of: &BTreeMap<String, &str>,
    failures: &mut Vec<String>,
) {
    for rec in records {
        let res = query(prom, rec);
        if res.is_empty() {
            failures.push(format!("recording rule {rec}: no data"));
        }
        for r in &res {
            let v = value(r);
            let inst = r["metric"]["instance"].as_str().unwrap_or("");
            if !plausible_record(rec, v) {
                failures.push(format!(
                    "recording rule {rec}: {v} implausible on {}",
                    fixture_of.get(inst).unwrap_or(&inst)
                ));
            }
        }
    }
}

/// The fixtures `query` has a series for (by its instance label).
fn fixtures_in<'a>(
    prom: &Proc,
    q: &str,
    fixture_of: &BTreeMap<String, &'a str>,
) -> BTreeSet<&'a str> {
    query(prom, q)
        .iter()
        .map(|r| fixture_of[r["metric"]["instance"].as_str().expect("instance")])
        .collect()
}

fn report(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} problem(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn dashboards_and_rules_on_real_prometheus() {
    dashboards_and_rules(&[]);
}

/// The same queries on a per-CPU config (the default config with every set
/// at `per: cpu`): every panel and rule works at both levels (issue 29).
#[test]
fn dashboards_and_rules_on_real_prometheus_per_cpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    dashboards_and_rules(&common::per_cpu_default_config(dir.path()));
}

/// Every node and cluster panel and node-level rule on the fixtures, the
/// exporters run with `extra` arguments.
fn dashboards_and_rules(extra: &[String]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (exporters, fixture_of, mut prom) = scraping(
        &FIXTURES,
        dir.path(),
        "instance:perf_ipc:ratio_rate5m",
        3,
        extra,
    );
    let up = query(&prom, &format!("up{{job=\"{JOB}\"}} == 1"));
    assert_eq!(up.len(), FIXTURES.len(), "targets up: {up:?}");
    let unavailable = unavailable(&prom, &fixture_of);

    let mut failures: Vec<String> = Vec::new();
    let mut checked = 0;
    for file in ["perf-exporter-node.json", "perf-exporter-cluster.json"] {
        let (panels, dash) = load_panels(file);
        let instance_var = dash["templating"]["list"]
            .as_array()
            .expect("templating")
            .iter()
            .find(|v| v["name"] == "instance")
            .expect("instance variable")
            .clone();
        // The node dashboard shows one node at a time; the cluster dashboard all ("All").
        let selections: Vec<Selection> = if instance_var["multi"] == true {
            let all = instance_var["allValue"]
                .as_str()
                .expect("allValue")
                .to_string();
            vec![Selection {
                vars: vec![("instance", all)],
                fixtures: FIXTURES.to_vec(),
            }]
        } else {
            per_node(&exporters)
        };
        // The top-down row has a test of its own, on the fixtures that count it.
        let panels: Vec<Panel> = panels
            .into_iter()
            .filter(|p| p.row != TOPDOWN_ROW)
            .filter(|p| !p.exprs.iter().any(|(_, e)| e.contains(BUDGET_FAMILY)))
            .collect();
        checked += check_panels(&prom, &panels, &selections, &unavailable, &mut failures);
    }
    assert!(checked > 60, "only {checked} queries ran");

    // Node-level recording rules (the per-pod ones need cgroups: the pods test).
    let records: Vec<String> = records()
        .into_iter()
        .filter(|r| !r.starts_with(POD_RULE_PREFIX) && !r.contains(TOPDOWN_RULES))
        .filter(|r| !LEVEL_2_SHARES.iter().any(|(h, ..)| h == r))
        .collect();
    assert!(records.len() >= 10, "{records:?}");
    check_records(&prom, &records, &fixture_of, &mut failures);
    // The nodes with DRAM counters all have a DRAM bandwidth; the VM has no IPC.
    assert_eq!(
        fixtures_in(&prom, "instance:perf_dram_bytes:rate5m", &fixture_of),
        BTreeSet::from(["intel-skx", "amd-zen4", "amd-zen3"]),
        "DRAM bandwidth recorded for"
    );
    assert_eq!(
        fixtures_in(&prom, "instance:perf_ipc:ratio_rate5m", &fixture_of),
        BTreeSet::from(["intel-skx", "amd-zen4", "amd-zen3"]),
        "IPC recorded for"
    );

    // Healthy simulated nodes raise no alert, pending or firing (the VM's
    // missing counters were never there, so they do not alert either).
    let alerts = query(&prom, "ALERTS");
    if !alerts.is_empty() {
        failures.push(format!("alerts on healthy nodes: {alerts:?}"));
    }

    prom.assert_running();
    report(&failures);
}

/// The simulated exporters of `fixtures` (with the fixture of each
/// address) and a Prometheus scraping them as one job, once every target was
/// scraped enough for rate() and the recording rule `record` has a series
/// for `nodes` nodes.
fn scraping<'a>(
    fixtures: &[&'a str],
    dir: &Path,
    record: &str,
    nodes: usize,
    extra: &[String],
) -> (Vec<(&'a str, Proc)>, BTreeMap<String, &'a str>, Proc) {
    let exporters: Vec<(&str, Proc)> = fixtures
        .iter()
        .map(|f| (*f, common::simulated_exporter_with(f, extra)))
        .collect();
    let fixture_of: BTreeMap<String, &str> = exporters
        .iter()
        .map(|(f, s)| (s.addr.clone(), *f))
        .collect();
    let targets = exporters.iter().map(|(_, s)| s.addr.clone()).collect();
    let mut prom = prometheus(dir, &[(JOB, targets)]);
    warm_up(&mut prom, |prom| {
        scraped(prom, fixtures.len()).or_else(|| {
            let got = query(prom, record).len();
            (got != nodes).then(|| format!("{record} recorded for {got} nodes"))
        })
    });
    (exporters, fixture_of, prom)
}

/// One selection per exporter (the node dashboard's single `$instance`).
fn per_node<'a>(exporters: &[(&'a str, Proc)]) -> Vec<Selection<'a>> {
    exporters
        .iter()
        .map(|(f, s)| Selection {
            vars: vec![("instance", regex_escape(&s.addr))],
            fixtures: vec![*f],
        })
        .collect()
}

/// The issue's proof for top-down: the node dashboard's top-down row and the
/// top-down recording rules on a real Prometheus scraping the simulated PMU
/// of intel-hybrid and amd-zen4 (and intel-skx, Arm N1, N2 and V2): every query has
/// plausible data or an explained absence, each node with slots has every
/// level-1 share, and the shares add up to 1 (the rules' and the panel's).
#[test]
#[allow(clippy::too_many_lines)] // one scenario; to be split into steps (issue 26)
fn topdown_row_and_rules_on_real_prometheus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (exporters, fixture_of, mut prom) = scraping(
        &TOPDOWN_FIXTURES,
        dir.path(),
        "instance:perf_topdown_retiring:ratio_rate5m",
        3,
        &[],
    );
    let unavailable = unavailable_of(&prom, &fixture_of);

    let mut failures: Vec<String> = Vec::new();
    let (panels, _) = load_panels("perf-exporter-node.json");
    let panels: Vec<Panel> = panels
        .into_iter()
        .filter(|p| p.row == TOPDOWN_ROW)
        .collect();
    assert_eq!(panels.len(), 2, "top-down row panels");
    let selections = per_node(&exporters);
    let checked = check_panels(&prom, &panels, &selections, &unavailable, &mut failures);
    assert!(
        checked >= 7 * TOPDOWN_FIXTURES.len(),
        "only {checked} queries ran"
    );

    // The panel's shares add up to 1 on each node with slots.
    let slots_panel = &panels[0];
    for sel in &selections {
        let vars: Vec<(&str, &str)> = sel.vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let total: f64 = slots_panel
            .exprs
            .iter()
            .flat_map(|(_, e)| query(&prom, &substitute(e, &vars)))
            .map(|r| value(&r))
            .sum();
        let has_slots = sel.fixtures[0] != "arm-neoverse-n1";
        if has_slots && (total - 1.0).abs() > 1e-6 {
            failures.push(format!(
                "{:?}: the panel's shares add up to {total}",
                sel.fixtures
            ));
        }
    }

    let records: Vec<String> = records()
        .into_iter()
        .filter(|r| r.contains(TOPDOWN_RULES))
        .collect();
    assert!(records.len() >= 13, "{records:?}");
    check_records(&prom, &records, &fixture_of, &mut failures);
    let sums = query(
        &prom,
        &format!("sum by (instance) ({{__name__=~\"{TOPDOWN_SHARES}\"}})"),
    );
    // The values of a query's samples scraped from `fixture`'s exporter.
    let of_fixture = |samples: &[Value], fixture: &str| -> Vec<f64> {
        samples
            .iter()
            .filter(|r| fixture_of[r["metric"]["instance"].as_str().expect("instance")] == fixture)
            .map(value)
            .collect()
    };
    let mut summed = BTreeSet::new();
    for r in &sums {
        let inst = r["metric"]["instance"].as_str().expect("instance");
        summed.insert(fixture_of[inst]);
        if (value(r) - 1.0).abs() > 1e-6 {
            failures.push(format!(
                "{}: the recorded shares add up to {}",
                fixture_of[inst],
                value(r)
            ));
        }
    }
    assert_eq!(
        summed,
        BTreeSet::from(["intel-hybrid", "amd-zen4", "intel-skx"]),
        "shares recorded for"
    );
    // The simulated pipelines' shares (src/perf/sim/accept.rs): Skylake and
    // Zen 4 from their raw events; the hybrid's P-cores in 255ths of their
    // slots (its `perf_topdown_*` are the P-cores' only: the E-cores' own
    // categories are the `perf_topdown_atom_*` families, read by the
    // derived `atom_*` shares, never added to the P-cores').
    let hybrid = |p_share: f64, _e_share: f64| p_share / 255.0;
    for (fixture, shares) in [
        ("intel-skx", [0.5, 0.2, 0.2, 0.1, f64::NAN]),
        ("amd-zen4", [0.4, 0.1, 0.2, 0.25, 0.05]),
        (
            "intel-hybrid",
            [
                hybrid(102.0, 0.4),
                hybrid(26.0, 0.1),
                hybrid(51.0, 0.25),
                hybrid(76.0, 0.25),
                f64::NAN,
            ],
        ),
    ] {
        let cats = [
            "retiring",
            "bad_speculation",
            "frontend_bound",
            "backend_bound",
            "smt_contention",
        ];
        for (cat, want) in cats.iter().zip(shares) {
            let rec = format!("instance:perf_topdown_{cat}:ratio_rate5m");
            let got = of_fixture(&query(&prom, &rec), fixture);
            let ok = match (want.is_nan(), got.as_slice()) {
                (true, []) => true,
                (false, [v]) => (v - want).abs() < 1e-3,
                _ => false,
            };
            if !ok {
                failures.push(format!("{fixture} {rec}: {got:?}, expected {want}"));
            }
        }
    }
    // Arm N2 (r0p0, perf's correction) and V2 (8 slots a cycle): the
    // derived level-1 rules, hand-computed in tests/sim/topdown_arm.rs.
    for (cat, want) in [
        ("retiring", 0.4),
        ("bad_speculation", 0.1),
        ("frontend_bound", 0.2),
        ("backend_bound", 0.3),
    ] {
        let rec = format!("instance:perf_{cat}:rate5m");
        for fixture in ARM_SLOT_FIXTURES {
            let got = of_fixture(&query(&prom, &rec), fixture);
            if got.len() != 1 || (got[0] - want).abs() > 1e-3 {
                failures.push(format!("{fixture} {rec}: {got:?}, expected {want}"));
            }
        }
    }
    let arm_stalls = [
        (
            "instance:perf_topdown_frontend_stall_cycles:ratio_rate5m",
            0.2,
        ),
        (
            "instance:perf_topdown_backend_stall_cycles:ratio_rate5m",
            0.3,
        ),
    ];
    // Every Arm fixture counts STALL_FRONTEND and STALL_BACKEND (the
    // simulator's rates are the same on each).
    for (rec, want) in arm_stalls {
        let got: Vec<f64> = query(&prom, rec).iter().map(value).collect();
        if got.len() != 1 + ARM_SLOT_FIXTURES.len() || got.iter().any(|g| (g - want).abs() > 1e-3) {
            failures.push(format!("Arm {rec}: {got:?}, expected {want} on each"));
        }
    }
    // Level 2 (each platform's formula) and the E-cores' level 1 (the
    // hybrid's only, from one core type's counts).
    for (rec, hybrid, skx, zen4) in LEVEL_2_SHARES {
        let mut got: Vec<(&str, f64)> = query(&prom, rec)
            .iter()
            .map(|r| {
                let inst = r["metric"]["instance"].as_str().expect("instance");
                (fixture_of[inst], value(r))
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(b.0));
        let mut want: Vec<(&str, f64)> = vec![("intel-hybrid", hybrid)];
        want.extend(skx.map(|v| ("intel-skx", v)));
        want.extend(zen4.map(|v| ("amd-zen4", v)));
        want.sort_by(|a, b| a.0.cmp(b.0));
        let ok = got.len() == want.len()
            && got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.0 == w.0 && (g.1 - w.1).abs() < 1e-3);
        if !ok {
            failures.push(format!("{rec}: {got:?}, expected {want:?}"));
        }
    }
    for (share, expected) in [
        (
            "instance:perf_topdown_bad_speculation:ratio_rate5m",
            &["intel-hybrid", "amd-zen4", "intel-skx"][..],
        ),
        (
            "instance:perf_topdown_backend_bound:ratio_rate5m",
            &["intel-hybrid", "amd-zen4", "intel-skx"],
        ),
        (
            "instance:perf_topdown_smt_contention:ratio_rate5m",
            &["amd-zen4"],
        ),
        (
            "instance:perf_topdown_frontend_stall_cycles:ratio_rate5m",
            &["arm-neoverse-n1", "arm-neoverse-n2", "arm-neoverse-v2"],
        ),
    ] {
        let got = fixtures_in(&prom, share, &fixture_of);
        if got != expected.iter().copied().collect() {
            failures.push(format!(
                "{share} recorded for {got:?}, expected {expected:?}"
            ));
        }
    }
    prom.assert_running();
    report(&failures);
}

/// The pod uids an exporter counts at pod level (series of the software
/// set, which every fixture counts, without `container_id`).
fn pod_uids(exporter: &Proc) -> BTreeSet<String> {
    let r = exporter.get("/metrics");
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
        .lines()
        .filter(|l| {
            l.starts_with("perf_cgroup_cpu_clock_seconds_total{") && !l.contains("container_id=")
        })
        .filter_map(|l| {
            let rest = &l[l.find("pod_uid=\"")? + "pod_uid=\"".len()..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

/// Static pods added to the Kubernetes tree: their cgroup uid is the
/// kubelet's config hash (32 hex digits). kube-state-metrics names the
/// first through its mirror pod (`MIRROR`, uid `MIRROR_UID`) and its
/// `kubernetes.io/config.hash` annotation; the second's is not exported.
const NAMED_STATIC: &str = "9c1e0b7d4a3f2e1d0c9b8a7f6e5d4c3b";
const UNNAMED_STATIC: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const MIRROR: &str = "etcd-sim";
const MIRROR_UID: &str = "6b0a9c8e-1f2d-4e3c-9b5a-7d6e5f4c3b2a";

/// A copy of the Kubernetes tree `from` under `dir` with the two static
/// pods added to the burstable level (1 s of CPU each, within the room
/// the level's usage leaves).
fn with_static_pods(from: &Path, dir: &Path) -> std::path::PathBuf {
    assert!(from.is_dir(), "{} does not exist", from.display());
    let to = dir.join("cgroup");
    let ok = std::process::Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(&to)
        .status()
        .expect("cp")
        .success();
    assert!(ok, "cp -r {} {}", from.display(), to.display());
    for uid in [NAMED_STATIC, UNNAMED_STATIC] {
        let pod = to.join(format!(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice"
        ));
        std::fs::create_dir(&pod).expect("mkdir");
        std::fs::write(
            pod.join("cpu.stat"),
            "usage_usec 1000000\nuser_usec 750000\nsystem_usec 250000\n",
        )
        .expect("write cpu.stat");
    }
    to
}

/// The expression of the panel titled `title`.
fn panel_expr(panels: &[Panel], title: &str) -> String {
    panels
        .iter()
        .find(|p| p.title == title)
        .and_then(|p| p.exprs.first())
        .unwrap_or_else(|| panic!("no panel {title}"))
        .1
        .clone()
}

/// Every node and namespace selected (the variables' "All"), and `pod`.
fn selection_vars(dash: &Value, pod: &str) -> Vec<(&'static str, String)> {
    let all = |name: &str| -> String {
        dash["templating"]["list"]
            .as_array()
            .expect("templating")
            .iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["allValue"].as_str())
            .unwrap_or_else(|| panic!("variable {name} without allValue"))
            .to_string()
    };
    vec![
        ("instance", all("instance")),
        ("namespace", all("namespace")),
        ("pod", regex_escape(pod)),
    ]
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario; to be split into steps (issue 26)
fn pods_dashboard_and_rules_on_real_prometheus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = with_static_pods(&repo_root().join(KUBERNETES_TREE), dir.path());
    // The default config, with every pod and container counted.
    let default =
        std::fs::read_to_string(repo_root().join("config/default.yaml")).expect("default config");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("{default}\ncgroups:\n  preset: kubernetes\n  containers: true\n"),
    )
    .expect("write config");
    let exporters: Vec<(&str, Proc)> = POD_FIXTURES
        .iter()
        .map(|f| {
            let sysfs = fixture(f);
            let args = [
                "--simulate",
                "--config.file",
                config.to_str().expect("utf-8"),
                "--path.sysfs",
                sysfs.to_str().expect("utf-8"),
                "--path.cgroupfs",
                tree.to_str().expect("utf-8"),
            ];
            (*f, exporter(&args))
        })
        .collect();
    let fixture_of: BTreeMap<String, &str> = exporters
        .iter()
        .map(|(f, s)| (s.addr.clone(), *f))
        .collect();

    // kube-state-metrics' kube_pod_info for every pod but the last, and
    // for the mirror pod of the static pod NAMED_STATIC, whose config hash
    // kube_pod_annotations gives; UNNAMED_STATIC's is not exported.
    let uids: Vec<String> = pod_uids(&exporters[0].1).into_iter().collect();
    for s in [NAMED_STATIC, UNNAMED_STATIC] {
        assert!(
            uids.iter().any(|u| u == s),
            "static pod {s} not counted: {uids:?}"
        );
    }
    let regular: Vec<&String> = uids
        .iter()
        .filter(|u| ![NAMED_STATIC, UNNAMED_STATIC].contains(&u.as_str()))
        .collect();
    assert!(
        regular.len() >= 3,
        "pods counted in {KUBERNETES_TREE}: {uids:?}"
    );
    let (unknown, known) = regular.split_last().expect("pods");
    let textfiles = dir.path().join("textfiles");
    std::fs::create_dir(&textfiles).expect("mkdir");
    let mut info =
        String::from("# HELP kube_pod_info Information about pod.\n# TYPE kube_pod_info gauge\n");
    for (i, uid) in known.iter().enumerate() {
        info.push_str(&format!(
            "kube_pod_info{{namespace=\"ns-{}\",pod=\"pod-{i}\",uid=\"{uid}\",node=\"sim\",created_by_kind=\"ReplicaSet\"}} 1\n",
            i % 2
        ));
    }
    info.push_str(&format!(
        "kube_pod_info{{namespace=\"kube-system\",pod=\"{MIRROR}\",uid=\"{MIRROR_UID}\",node=\"sim\",created_by_kind=\"Node\"}} 1\n\
         # HELP kube_pod_annotations Kubernetes annotations converted to Prometheus labels.\n# TYPE kube_pod_annotations gauge\n\
         kube_pod_annotations{{namespace=\"kube-system\",pod=\"{MIRROR}\",uid=\"{MIRROR_UID}\",annotation_kubernetes_io_config_hash=\"{NAMED_STATIC}\"}} 1\n"
    ));
    std::fs::write(textfiles.join("kube.prom"), info).expect("write textfile");
    let ksm = Proc::spawn(
        &[],
        &server_binary("NODE_EXPORTER"),
        &[
            "--collector.disable-defaults",
            "--collector.textfile",
            &format!("--collector.textfile.directory={}", textfiles.display()),
        ],
    );

    let targets = exporters.iter().map(|(_, s)| s.addr.clone()).collect();
    let mut prom = prometheus(
        dir.path(),
        &[
            (JOB, targets),
            ("kube-state-metrics", vec![ksm.addr.clone()]),
        ],
    );
    // Pods with cycles: those of the nodes with a core PMU.
    let with_cycles = POD_FIXTURES.len() - 1;
    warm_up(&mut prom, |prom| {
        scraped(prom, POD_FIXTURES.len()).or_else(|| {
            let known = query(prom, "kube_pod_info").len();
            let ipc = query(prom, "namespace_pod:perf_cgroup_ipc:ratio_rate5m").len();
            (known != regular.len() || ipc != uids.len() * with_cycles).then(|| {
                format!("kube_pod_info of {known} pods, per-pod IPC recorded {ipc} times (want {} × {with_cycles})", uids.len())
            })
        })
    });
    let unavailable = unavailable(&prom, &fixture_of);

    // Every node and namespace; the drill-down on pod-0.
    let (panels, dash) = load_panels("perf-exporter-pods.json");
    let all = |name: &str| -> String {
        dash["templating"]["list"]
            .as_array()
            .expect("templating")
            .iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["allValue"].as_str())
            .unwrap_or_else(|| panic!("variable {name} without allValue"))
            .to_string()
    };
    let selection = Selection {
        vars: vec![
            ("instance", all("instance")),
            ("namespace", all("namespace")),
            ("pod", regex_escape("pod-0")),
        ],
        fixtures: POD_FIXTURES.to_vec(),
    };
    let mut failures: Vec<String> = Vec::new();
    let checked = check_panels(&prom, &panels, &[selection], &unavailable, &mut failures);
    assert!(checked >= 15, "only {checked} queries ran");

    // Disjoint pods never use more than their node's cycles.
    for r in query(
        &prom,
        &format!(
            "sum by (instance) (rate(perf_cgroup_cpu_cycles_total{{container_id=\"\"}}[{RATE_INTERVAL}])) \
             / on (instance) sum by (instance) (rate(perf_cpu_cycles_total[{RATE_INTERVAL}]))"
        ),
    ) {
        if !(0.0..=1.0 + 1e-9).contains(&value(&r)) {
            failures.push(format!("pods' share of their node's cycles: {r}"));
        }
    }

    // Per-pod rules: one series per pod and node with cycles, named through
    // kube_pod_info, the pod it lacks kept with its uid only.
    let records: Vec<String> = records()
        .into_iter()
        .filter(|r| r.starts_with(POD_RULE_PREFIX))
        .collect();
    assert_eq!(records.len(), 3, "{records:?}");
    check_records(&prom, &records, &fixture_of, &mut failures);
    for rec in &records {
        let res = query(&prom, rec);
        let on: BTreeSet<&str> = res
            .iter()
            .map(|r| fixture_of[r["metric"]["instance"].as_str().expect("instance")])
            .collect();
        if on != BTreeSet::from(["intel-skx", "amd-zen4"]) {
            failures.push(format!("{rec}: recorded on {on:?}"));
        }
        for r in &res {
            let m = &r["metric"];
            let uid = m["pod_uid"].as_str().unwrap_or("");
            let named = m["namespace"].is_string() && m["pod"].is_string();
            let nameless = uid == unknown.as_str() || uid == UNNAMED_STATIC;
            let is_static = [NAMED_STATIC, UNNAMED_STATIC].contains(&uid);
            if named == nameless
                || m["qos_class"].is_null()
                || (m["static_pod"] == "true") != is_static
                || (uid == NAMED_STATIC && m["pod"] != MIRROR)
            {
                failures.push(format!("{rec}: labels of pod {uid}: {m}"));
            }
        }
        if res.len() != uids.len() * with_cycles {
            failures.push(format!(
                "{rec}: {} series for {} pods",
                res.len(),
                uids.len()
            ));
        }
    }

    // Issue 24 item 6: the drill-down finds the static pod by its mirror
    // pod's name (joined through the annotation); the other one is listed
    // by its uid in a panel of its own.
    let drill = selection_vars(&dash, MIRROR);
    let vars: Vec<(&str, &str)> = drill.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cpu = query(
        &prom,
        &substitute(&panel_expr(&panels, "CPU time of the pod"), &vars),
    );
    let found: BTreeSet<(String, String)> = cpu
        .iter()
        .map(|r| {
            let m = &r["metric"];
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("pod"), s("pod_uid"))
        })
        .collect();
    if found != BTreeSet::from([(MIRROR.to_string(), NAMED_STATIC.to_string())]) {
        failures.push(format!(
            "CPU time of the pod {MIRROR}: {found:?}, want the static pod {NAMED_STATIC} under its mirror's name"
        ));
    }
    let unnamed: BTreeSet<String> = query(
        &prom,
        &substitute(&panel_expr(&panels, "Static pods without a name"), &vars),
    )
    .iter()
    .filter_map(|r| r["metric"]["pod_uid"].as_str().map(str::to_string))
    .collect();
    if unnamed != BTreeSet::from([UNNAMED_STATIC.to_string()]) {
        failures.push(format!(
            "Static pods without a name: {unnamed:?}, want {UNNAMED_STATIC} only"
        ));
    }

    let alerts = query(&prom, "ALERTS");
    if !alerts.is_empty() {
        failures.push(format!("alerts on healthy nodes: {alerts:?}"));
    }
    prom.assert_running();
    report(&failures);
}
