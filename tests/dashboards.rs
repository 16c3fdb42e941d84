//! Every query of the Grafana dashboards (grafana/dashboards/*.json) and every
//! recording rule and alert (grafana/rules/perf-exporter.rules.yml), run on a
//! real Prometheus 2.53 that scraped the real exporter running `--simulate`
//! on four sysfs fixtures at once: intel-skx, amd-zen4, amd-zen3 (DRAM total
//! only) and vm-no-pmu (no hardware counters), one job, four instances.
//!
//! Dashboard variables are substituted the way Grafana does for Prometheus:
//! `$job`, `$instance` (regex-escaped; the cluster dashboard's "All" value),
//! `$__rate_interval`. Each query must return data on some fixture; where it
//! returns nothing, every node must lack (perf_event_available == 0) one of
//! the metrics it reads and the panel must say so (noValue). IPC, bandwidth
//! and ratio panels must fall in plausible ranges.

mod common;

use common::{repo_root, server_binary, simulated_exporter, Server};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::time::{Duration, Instant};

const JOB: &str = "perf-exporter";
const FIXTURES: [&str; 4] = ["intel-skx", "amd-zen4", "amd-zen3", "vm-no-pmu"];
/// `$__rate_interval` with a 1 s scrape interval (Grafana: at least four scrapes).
const RATE_INTERVAL: &str = "5s";
/// How long to wait for enough scrapes and rule evaluations.
const WARM_UP: Duration = Duration::from_secs(45);

/// An instant query; panics on any error (with the query).
fn query(prom: &Server, q: &str) -> Vec<Value> {
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

fn substitute(expr: &str, instance: &str) -> String {
    expr.replace("$__rate_interval", RATE_INTERVAL)
        .replace("$instance", instance)
        .replace("$job", &regex_escape(JOB))
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
    for p in dash["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            flat.extend(p["panels"].as_array().cloned().unwrap_or_default());
        } else {
            flat.push(p.clone());
        }
    }
    let panels = flat
        .iter()
        .map(|p| Panel {
            dashboard: file.to_string(),
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

#[test]
fn dashboards_and_rules_on_real_prometheus() {
    let prometheus = server_binary("PROMETHEUS");
    let exporters: Vec<(&str, Server)> = FIXTURES
        .iter()
        .map(|f| (*f, simulated_exporter(f)))
        .collect();
    let fixture_of: BTreeMap<String, &str> = exporters
        .iter()
        .map(|(f, s)| (s.addr.clone(), *f))
        .collect();

    let dir = tempfile::tempdir().expect("tempdir");
    let rules = repo_root().join("grafana/rules/perf-exporter.rules.yml");
    let targets: Vec<String> = exporters
        .iter()
        .map(|(_, s)| format!("'{}'", s.addr))
        .collect();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - '{}'\n\
             scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: [{}]\n",
            rules.display(),
            targets.join(", ")
        ),
    )
    .expect("write prometheus.yml");
    let args: Vec<OsString> = vec![
        format!("--config.file={}", cfg.display()).into(),
        format!("--storage.tsdb.path={}", dir.path().join("data").display()).into(),
    ];
    let mut prom = Server::start("prometheus", &prometheus, &args, "--web.listen-address");

    // Enough scrapes of every target for rate() over RATE_INTERVAL, and the
    // recording rules evaluated on scraped rates.
    let deadline = Instant::now() + WARM_UP;
    loop {
        prom.assert_running();
        let scrapes = query(
            &prom,
            &format!("count_over_time(up{{job=\"{JOB}\"}}[1m]) >= 7"),
        );
        let ipc = query(&prom, "instance:perf_ipc:ratio_rate5m");
        if scrapes.len() == FIXTURES.len() && ipc.len() == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after {WARM_UP:?}: {} of {} targets scraped 7 times, IPC recorded for {} nodes\nprometheus output:\n{}",
            scrapes.len(),
            FIXTURES.len(),
            ipc.len(),
            prom.output()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let up = query(&prom, &format!("up{{job=\"{JOB}\"}} == 1"));
    assert_eq!(up.len(), FIXTURES.len(), "targets up: {up:?}");

    // Which metrics each node cannot count (on any of its PMUs).
    let mut unavailable: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for r in query(
        &prom,
        &format!("min by (instance, metric) (perf_event_available{{job=\"{JOB}\"}}) == 0"),
    ) {
        let inst = r["metric"]["instance"].as_str().expect("instance");
        unavailable
            .entry(fixture_of[inst])
            .or_default()
            .insert(r["metric"]["metric"].as_str().expect("metric").to_string());
    }
    assert!(
        unavailable["vm-no-pmu"].contains("perf_cpu_cycles_total"),
        "{unavailable:?}"
    );

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
        let selections: Vec<(String, Vec<&str>)> = if instance_var["multi"] == true {
            let all = instance_var["allValue"]
                .as_str()
                .expect("allValue")
                .to_string();
            vec![(all, FIXTURES.to_vec())]
        } else {
            exporters
                .iter()
                .map(|(f, s)| (regex_escape(&s.addr), vec![*f]))
                .collect()
        };
        for p in &panels {
            for (ref_id, expr) in &p.exprs {
                let mut any_data = false;
                for (inst, fixtures) in &selections {
                    let q = substitute(expr, inst);
                    assert!(!q.contains('$'), "unsubstituted variable in {q}");
                    let res = query(&prom, &q);
                    checked += 1;
                    let what = format!("{} / {} / {ref_id} on {fixtures:?}", p.dashboard, p.title);
                    if res.is_empty() {
                        // Allowed only where the metrics are missing, and the panel says so.
                        let read = metrics_in(expr);
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
    }
    assert!(checked > 60, "only {checked} queries ran");

    // Recording rules: every one records a value for the nodes that count its inputs.
    let rules_text = std::fs::read_to_string(&rules).expect("read rules");
    let records: Vec<&str> = rules_text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .collect();
    assert!(records.len() >= 10, "{records:?}");
    for rec in &records {
        let res = query(&prom, rec);
        if res.is_empty() {
            failures.push(format!("recording rule {rec}: no data"));
        }
        for r in &res {
            let v = value(r);
            let inst = r["metric"]["instance"].as_str().unwrap_or("");
            let ok = if rec.contains("perf_ipc") {
                (0.5..=4.0).contains(&v)
            } else if rec.contains("bytes") {
                (1e6..=1e12).contains(&v)
            } else if rec.contains("ratio") {
                (0.0..=1.0 + 1e-9).contains(&v)
            } else {
                v.is_finite() && v >= 0.0
            };
            if !ok {
                failures.push(format!(
                    "recording rule {rec}: {v} implausible on {}",
                    fixture_of.get(inst).unwrap_or(&inst)
                ));
            }
        }
    }
    // The nodes with DRAM counters all have a DRAM bandwidth; the VM has no IPC.
    let dram: BTreeSet<&str> = query(&prom, "instance:perf_dram_bytes:rate5m")
        .iter()
        .map(|r| fixture_of[r["metric"]["instance"].as_str().expect("instance")])
        .collect();
    assert_eq!(
        dram,
        BTreeSet::from(["intel-skx", "amd-zen4", "amd-zen3"]),
        "DRAM bandwidth recorded for"
    );
    let ipc: BTreeSet<&str> = query(&prom, "instance:perf_ipc:ratio_rate5m")
        .iter()
        .map(|r| fixture_of[r["metric"]["instance"].as_str().expect("instance")])
        .collect();
    assert_eq!(
        ipc,
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
    assert!(
        failures.is_empty(),
        "{} problem(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
