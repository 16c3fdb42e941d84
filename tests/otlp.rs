//! OTLP push end to end: the real binary counting live software events
//! (root) or on the simulated PMU, pushing to a real VictoriaMetrics 1.112
//! over HTTP/protobuf and to a gRPC receiver of our own that decodes every
//! request, with TLS, redirects, a collector that dies or hangs, reloads
//! and shutdown. The harness is `tests/common/otlp.rs`.
//!
//! VictoriaMetrics comes from `scripts/fetch-servers.sh` (its path in
//! `PERF_EXPORTER_TEST_VICTORIA_METRICS`, as `scripts/test.sh` exports it).
//! A test that cannot get it fails.

mod common;

use common::otlp::{
    exporter_fails, exports_in, find_metric, resource_of, str_attr, sum_by_cpu, sum_points,
    value_of, wait_for, Exporter, Pki, Received, Receiver, Vm,
};
use common::{fixture, online_cpus, require_perf_privilege};
use opentelemetry_proto::tonic::metrics::v1::metric;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The online CPUs as `cpu` label values.
fn cpus() -> Vec<String> {
    online_cpus().iter().map(u32::to_string).collect()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// The OTel `host.arch` of this machine.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    }
}

/// The live exporter (root: it counts system-wide).
fn live(args: &[&str], env: &[(&str, String)]) -> Exporter {
    require_perf_privilege();
    Exporter::start(args, env)
}

/// The exporter on the simulated Skylake-SP.
fn simulated(args: &[&str], env: &[(&str, String)]) -> Exporter {
    let f = fixture("intel-skx");
    let mut a = vec!["--simulate", "--path.sysfs", f.to_str().unwrap()];
    a.extend_from_slice(args);
    Exporter::start(&a, env)
}

// ------------------------------------------------------- VictoriaMetrics

/// Per-CPU values of a query's series.
fn by_cpu(rows: &[(BTreeMap<String, String>, f64)]) -> BTreeMap<String, f64> {
    rows.iter()
        .map(|(l, v)| (l.get("cpu").cloned().unwrap_or_default(), *v))
        .collect()
}

#[test]
fn otlp_http_push_to_victoriametrics() {
    let cpus = cpus();
    // With Prometheus naming VictoriaMetrics 1.112 applies the Prometheus
    // translation (unit suffix, `_total`, `_` in labels): the names come
    // back as ours. Without it, it keeps the OTel names and attribute keys.
    let vm = Vm::start(&["-opentelemetry.usePrometheusNaming"]);
    let vm_plain = Vm::start(&[]);
    let env = |vm: &Vm, gzip: bool| {
        let mut e = vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}/opentelemetry", vm.addr),
            ),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1000".to_string()),
            ("OTEL_SERVICE_NAME", "perf-e2e".to_string()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=e2e,team=perf%20team".to_string(),
            ),
            ("K8S_NODE_NAME", "node-e2e".to_string()),
        ];
        if gzip {
            e.push(("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".to_string()));
        }
        e
    };
    let ex = live(&[], &env(&vm, true));
    let ex_plain = live(&[], &env(&vm_plain, false));

    let q_cs = "perf_context_switches_total";
    let q_clock = "perf_cpu_clock_seconds_total";
    wait_for(
        "context switches per CPU in VictoriaMetrics",
        Duration::from_secs(30),
        || vm.query(q_cs).len() == cpus.len() && vm.query(q_clock).len() == cpus.len(),
    );
    let first_cs = vm.query(q_cs);
    let first_clock = vm.query(q_clock);
    let host = hostname();
    for (labels, _) in first_cs.iter().chain(&first_clock) {
        assert!(cpus.contains(&labels["cpu"]), "{labels:?}");
        assert_eq!(labels["host_name"], host, "{labels:?}");
        assert_eq!(labels["host_arch"], host_arch(), "{labels:?}");
        assert_eq!(labels["k8s_node_name"], "node-e2e", "{labels:?}");
        assert_eq!(labels["service_name"], "perf-e2e", "{labels:?}");
        assert_eq!(labels["service_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(labels["deployment_environment"], "e2e", "{labels:?}");
        assert_eq!(labels["team"], "perf team", "{labels:?}");
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        if cpuinfo.contains("vendor_id") {
            assert!(!labels["host_cpu_vendor_id"].is_empty(), "{labels:?}");
            assert!(!labels["host_cpu_model_name"].is_empty(), "{labels:?}");
        }
    }
    // Later pushes (interval 1 s) carry increased counters.
    let c1 = by_cpu(&first_clock);
    let mut c2 = c1.clone();
    wait_for(
        "the cpu clock of every CPU to increase",
        Duration::from_secs(20),
        || {
            c2 = by_cpu(&vm.query(q_clock));
            cpus.iter().all(|cpu| c2.get(cpu) > c1.get(cpu))
        },
    );
    let s1 = by_cpu(&first_cs);
    let mut s2 = s1.clone();
    wait_for("more context switches", Duration::from_secs(20), || {
        s2 = by_cpu(&vm.query(q_cs));
        s2.values().sum::<f64>() > s1.values().sum::<f64>()
    });
    for cpu in &cpus {
        assert!(
            s2[cpu] >= s1[cpu],
            "context switches of CPU {cpu} decreased: {s1:?} -> {s2:?}"
        );
    }
    assert!(
        s2.values().sum::<f64>() > s1.values().sum::<f64>(),
        "no context switch at all between two pushes: {s1:?} -> {s2:?}"
    );
    // Seconds of cpu clock: about one per second per CPU since start.
    assert!(c2.values().all(|v| *v > 1.0 && *v < 600.0), "{c2:?}");
    // Gauges arrive as gauges; every software counter of the default config.
    for m in [
        "perf_event_available",
        "perf_page_faults_total",
        "perf_cpu_migrations_total",
        "perf_group_enabled_seconds_total",
    ] {
        assert!(!vm.query(m).is_empty(), "{m} missing");
    }

    // Without Prometheus naming: the OTel names and attribute keys.
    wait_for(
        "OTel names in the second VictoriaMetrics",
        Duration::from_secs(30),
        || {
            vm_plain
                .query(r#"{__name__="perf.context.switches"}"#)
                .len()
                == cpus.len()
        },
    );
    let plain = vm_plain.query(r#"{__name__="perf.cpu.clock"}"#);
    assert_eq!(plain.len(), cpus.len(), "{plain:?}");
    for (labels, _) in &plain {
        assert_eq!(labels["host.name"], host);
        assert_eq!(labels["k8s.node.name"], "node-e2e");
        assert_eq!(labels["service.name"], "perf-e2e");
    }
    assert!(vm_plain.query("perf_context_switches_total").is_empty());

    // The push is counted on /metrics, next to the same counters.
    let (text, _) = ex.scrape();
    let (ok, failed) = exports_in(&text);
    assert!(ok >= 3.0 && failed == 0.0, "success {ok}, failure {failed}");
    assert!(
        text.contains("perf_context_switches_total{cpu=\"0\"}"),
        "{text}"
    );
    let (ok, failed) = ex_plain.exports();
    assert!(ok >= 3.0 && failed == 0.0, "success {ok}, failure {failed}");
    assert!(
        !ex.proc.log().contains("OTLP export failed"),
        "{}",
        ex.proc.log()
    );
}

/// The metric names of an exposition (`# TYPE` lines).
fn exposed_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Issue 10, defect 4 (OTLP side): what a receiver stores under the
/// Prometheus translation is exactly the exposition name; nothing is
/// renamed on the way.
#[test]
fn otlp_names_are_the_exposition_names() {
    let vm = Vm::start(&["-opentelemetry.usePrometheusNaming"]);
    let ex = simulated(
        &["--otlp.interval", "500ms"],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}/opentelemetry", vm.addr),
        )],
    );
    let exposed = exposed_names(&ex.scrape().0);
    let must = [
        "perf_cpu_cycles_total",
        "perf_instructions_total",
        "perf_dram_read_bytes_total",
        "perf_cpu_clock_seconds_total",
        "perf_event_available",
        "perf_group_enabled_seconds_total",
    ];
    for n in must {
        assert!(exposed.contains(n), "{n} not on /metrics: {exposed:?}");
    }
    let mut stored = Vec::new();
    wait_for(
        "the metrics in VictoriaMetrics",
        Duration::from_secs(30),
        || {
            stored = vm.names();
            must.iter().all(|n| stored.iter().any(|s| s == n))
        },
    );
    assert!(stored.len() > 20, "{stored:?}");
    for n in &stored {
        assert!(
            exposed.contains(n),
            "`{n}` is stored from OTLP, but /metrics has no such name: {exposed:?}"
        );
    }
}

// ------------------------------------------------------------ gRPC

#[test]
fn otlp_grpc_push_with_gzip_and_a_custom_header() {
    let cpus = cpus();
    let rx = Receiver::start(None);
    let ex = live(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", rx.addr)),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-test-token=s3cr%3Dt".into()),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".into()),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1000".into()),
            ("K8S_NODE_NAME", "node-grpc".into()),
        ],
    );
    wait_for("two gRPC exports", Duration::from_secs(20), || {
        rx.received().len() >= 2
    });
    let got = rx.received();
    for r in &got {
        assert_eq!(r.token.as_deref(), Some("s3cr=t"));
        assert_eq!(r.encoding.as_deref(), Some("gzip"));
    }
    let (a, b) = (&got[0].req, &got[got.len() - 1].req);
    assert_eq!(a.resource_metrics.len(), 1);
    let res = resource_of(a);
    assert_eq!(str_attr(res, "host.name"), Some(hostname()));
    assert_eq!(str_attr(res, "k8s.node.name").as_deref(), Some("node-grpc"));
    assert_eq!(
        str_attr(res, "service.name").as_deref(),
        Some("perf-exporter")
    );
    assert_eq!(str_attr(res, "host.arch").as_deref(), Some(host_arch()));
    let scope = a.resource_metrics[0].scope_metrics[0]
        .scope
        .as_ref()
        .unwrap();
    assert_eq!(scope.name, "perf-exporter");

    let cs = find_metric(a, "perf.context.switches").expect("perf.context.switches");
    assert_eq!(cs.unit, "{switch}");
    let clock = find_metric(a, "perf.cpu.clock").expect("perf.cpu.clock");
    assert_eq!(clock.unit, "s");
    assert!(
        clock.description.contains("cpu-clock"),
        "{}",
        clock.description
    );
    let (cs1, cl1) = (sum_by_cpu(cs), sum_by_cpu(clock));
    assert_eq!(cl1.keys().cloned().collect::<Vec<_>>(), cpus);
    assert_eq!(cs1.keys().cloned().collect::<Vec<_>>(), cpus);
    let cl2 = sum_by_cpu(find_metric(b, "perf.cpu.clock").unwrap());
    let cs2 = sum_by_cpu(find_metric(b, "perf.context.switches").unwrap());
    for c in &cpus {
        assert!(cl2[c] > cl1[c], "{cl1:?} -> {cl2:?}");
        assert!(cs2[c] >= cs1[c], "{cs1:?} -> {cs2:?}");
    }
    assert!(cs2.values().sum::<f64>() > cs1.values().sum::<f64>());
    let avail = find_metric(a, "perf.event.available").expect("perf.event.available");
    assert!(
        matches!(avail.data, Some(metric::Data::Gauge(_))),
        "{avail:?}"
    );
    let (ok, failed) = ex.exports();
    assert!(ok >= 2.0 && failed == 0.0, "{ok} {failed}");
}

#[test]
fn otlp_only_has_no_listener_flags_override_env_and_shutdown_flushes_once() {
    let rx = Receiver::start(None);
    let bogus = common::free_port();
    let mut ex = live(
        &[
            "--otlp.only",
            "--otlp.protocol",
            "grpc",
            "--otlp.endpoint",
            &format!("http://{}", rx.addr),
            "--otlp.headers",
            "x-test-token=from-flag",
            "--otlp.compression",
            "none",
            "--otlp.interval",
            "1h",
        ],
        &[
            // Each of these is overridden by its flag.
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{bogus}"),
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-test-token=from-env,x-other=env".into(),
            ),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".into()),
        ],
    );
    // No listener: the address given is not bound.
    let log = ex.proc.log();
    assert!(log.contains("--otlp.only: no HTTP listener"), "{log}");
    assert!(!log.contains("listening"), "{log}");
    assert!(rx.received().is_empty(), "pushed before the first interval");
    let (st, took) = ex.proc.terminate(Duration::from_secs(10));
    assert!(st.success(), "{st}\n{}", ex.proc.log());
    let got = rx.received();
    assert_eq!(
        got.len(),
        1,
        "exactly one push (the final one at shutdown): none at start, none periodic"
    );
    assert_eq!(got[0].token.as_deref(), Some("from-flag"));
    assert_eq!(
        got[0].encoding, None,
        "--otlp.compression none wins over the environment"
    );
    assert!(find_metric(&got[0].req, "perf.cpu.clock").is_some());
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(ex
        .proc
        .log()
        .contains("final OTLP export at shutdown succeeded"));
}

/// Nanoseconds since the Unix epoch, now.
fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// `(start, time, value)` of a sum's point on `cpu` in one export.
fn point_on(r: &Received, name: &str, cpu: &str) -> Option<(u64, u64, f64)> {
    let m = find_metric(&r.req, name)?;
    sum_points(m)
        .iter()
        .find(|p| str_attr(&p.attributes, "cpu").as_deref() == Some(cpu))
        .map(|p| (p.start_time_unix_nano, p.time_unix_nano, value_of(p)))
}

/// Issue 10, defect 2: a series' start is when its count began, not the
/// first export; a reload that changes its encoding restarts the count
/// and the start with it; a count never goes down under one start.
#[test]
fn otlp_start_times_are_when_counting_began_and_restart_with_the_count() {
    let rx = Receiver::start(None);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("perf.yaml");
    let yaml = |event: &str| {
        format!("sets:\n  - name: core\n    events:\n      - metric: perf_cpu_cycles_total\n        event: {event}\n")
    };
    std::fs::write(&cfg, yaml("cycles")).unwrap();
    let before = now_nanos();
    let ex = simulated(
        &[
            "--config.file",
            cfg.to_str().unwrap(),
            "--otlp.protocol",
            "grpc",
            "--otlp.endpoint",
            &format!("http://{}", rx.addr),
            "--otlp.interval",
            "1s",
        ],
        &[],
    );
    let started = now_nanos();
    wait_for("two exports", Duration::from_secs(30), || {
        rx.received().len() >= 2
    });
    let got = rx.received();
    let (start, time, _) = point_on(&got[0], "perf.cpu.cycles", "0").expect("cycles on cpu 0");
    assert!(
        before <= start && start <= started,
        "start {start} is not when the exporter started counting ({before}..{started})"
    );
    assert!(
        time - start >= 800_000_000,
        "the first point covers {} ms: its start is the export, not when counting began",
        (time - start) / 1_000_000
    );
    let (start2, ..) = point_on(&got[1], "perf.cpu.cycles", "0").unwrap();
    assert_eq!(start2, start, "the start of a continuing count moved");

    // A reload that changes the encoding: the count restarts, and so
    // does its start.
    std::fs::write(&cfg, yaml("branch-misses")).unwrap();
    ex.proc.signal("HUP");
    let mut restart = None;
    wait_for(
        "an export of the restarted count",
        Duration::from_secs(30),
        || {
            let got = rx.received();
            let pts: Vec<_> = got
                .iter()
                .filter_map(|r| point_on(r, "perf.cpu.cycles", "0"))
                .collect();
            restart = pts
                .windows(2)
                .find(|w| w[1].2 < w[0].2)
                .map(|w| (w[0], w[1]));
            restart.is_some()
        },
    );
    let (old, new) = restart.unwrap();
    assert!(old.0 == start, "{old:?}");
    assert!(
        new.0 > old.0 && new.0 >= old.1 && new.0 <= new.1,
        "the restarted count {} -> {} kept an old start, or starts outside (previous point, its point]: {old:?} -> {new:?}",
        old.2,
        new.2
    );
    // Across every export and CPU: a count never goes down under one start.
    let got = rx.received();
    for cpu in cpus_of(&got[0], "perf.cpu.cycles") {
        let pts: Vec<_> = got
            .iter()
            .filter_map(|r| point_on(r, "perf.cpu.cycles", &cpu))
            .collect();
        for w in pts.windows(2) {
            assert!(
                w[1].0 != w[0].0 || w[1].2 >= w[0].2,
                "cpu {cpu}: {} -> {} under the same start {}",
                w[0].2,
                w[1].2,
                w[0].0
            );
            assert!(w[1].0 <= w[1].1, "cpu {cpu}: start after the point: {w:?}");
        }
    }
}

/// The `cpu` attributes of a sum in one export.
fn cpus_of(r: &Received, name: &str) -> Vec<String> {
    sum_points(find_metric(&r.req, name).unwrap())
        .iter()
        .filter_map(|p| str_attr(&p.attributes, "cpu"))
        .collect()
}

/// The one export of a simulated `--otlp.only` exporter that pushes only
/// at shutdown.
fn final_push(env: &[(&str, String)]) -> Received {
    let rx = Receiver::start(None);
    let mut ex = simulated(
        &[
            "--otlp.only",
            "--otlp.protocol",
            "grpc",
            "--otlp.endpoint",
            &format!("http://{}", rx.addr),
            "--otlp.interval",
            "1h",
        ],
        env,
    );
    let (st, _) = ex.proc.terminate(Duration::from_secs(10));
    assert!(st.success(), "{st}\n{}", ex.proc.log());
    let got = rx.received();
    assert_eq!(got.len(), 1, "{}", ex.proc.log());
    got.into_iter().next().unwrap()
}

/// Issue 10, defect 5: `telemetry.sdk.*` and a `service.instance.id` that
/// stays the same across restarts, differs per service, and yields to
/// the user's.
#[test]
fn otlp_resource_names_the_sdk_and_a_stable_service_instance() {
    let a = final_push(&[]);
    let res = resource_of(&a.req);
    let attr = |k: &str| str_attr(res, k);
    assert_eq!(attr("telemetry.sdk.name").as_deref(), Some("perf-exporter"));
    assert_eq!(attr("telemetry.sdk.language").as_deref(), Some("rust"));
    assert_eq!(
        attr("telemetry.sdk.version").as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let id = attr("service.instance.id").expect("service.instance.id");
    assert!(
        id.len() == 36 && id.as_bytes()[14] == b'5',
        "not a UUID v5: {id}"
    );
    let again = final_push(&[]);
    assert_eq!(
        str_attr(resource_of(&again.req), "service.instance.id"),
        Some(id.clone()),
        "not stable across restarts"
    );
    let other = final_push(&[("OTEL_SERVICE_NAME", "other".into())]);
    assert_ne!(
        str_attr(resource_of(&other.req), "service.instance.id"),
        Some(id)
    );
    let user = final_push(&[(
        "OTEL_RESOURCE_ATTRIBUTES",
        "service.instance.id=pod-a".into(),
    )]);
    assert_eq!(
        str_attr(resource_of(&user.req), "service.instance.id").as_deref(),
        Some("pod-a")
    );
}

// ------------------------------------------------------------ failures

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Scrapes for `span`, every 100 ms: latencies and the last body.
fn scrape_for(ex: &Exporter, span: Duration) -> (Vec<Duration>, String) {
    let t0 = Instant::now();
    let mut lat = Vec::new();
    let mut last = String::new();
    while t0.elapsed() < span {
        let (body, d) = ex.scrape();
        lat.push(d);
        last = body;
        std::thread::sleep(Duration::from_millis(100));
    }
    (lat, last)
}

fn assert_scrapes_unaffected(before: &mut [Duration], after: &mut [Duration]) {
    let (mb, ma) = (median(before), median(after));
    let max_b = *before.iter().max().unwrap();
    let max_a = *after.iter().max().unwrap();
    assert!(
        ma <= mb * 3 + Duration::from_millis(50),
        "median scrape {mb:?} before, {ma:?} after"
    );
    assert!(
        max_a <= (max_b * 5).max(Duration::from_millis(500)),
        "slowest scrape {max_b:?} before, {max_a:?} after"
    );
}

#[test]
fn otlp_collector_killed_mid_run_scrapes_stay_fast_and_failures_are_counted() {
    let mut vm = Vm::start(&[]);
    let ex = live(
        &[],
        &[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}/opentelemetry", vm.addr),
            ),
            ("OTEL_METRIC_EXPORT_INTERVAL", "500".into()),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000".into()),
        ],
    );
    wait_for("two successful exports", Duration::from_secs(20), || {
        ex.exports().0 >= 2.0
    });
    let (mut before, _) = scrape_for(&ex, Duration::from_secs(2));
    let (_, failed0) = ex.exports();
    assert_eq!(failed0, 0.0);
    // Kill the collector (SIGKILL, by pid).
    vm.proc.child.kill().unwrap();
    vm.proc.child.wait().unwrap();
    let (mut after, last) = scrape_for(&ex, Duration::from_secs(6));
    let (ok, failed) = exports_in(&last);
    assert!(
        failed >= 2.0,
        "failures not counted: success {ok}, failure {failed}"
    );
    assert_scrapes_unaffected(&mut before, &mut after);
    // The failure is logged, rate limited: once, not once per export.
    let log = ex.proc.log();
    assert_eq!(log.matches("OTLP export failed").count(), 1, "{log}");
}

#[test]
fn otlp_hanging_collector_never_slows_scrapes_and_shutdown_is_bounded() {
    // A collector that accepts connections and never answers.
    let hole = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = hole.local_addr().unwrap().to_string();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h2 = held.clone();
    std::thread::spawn(move || {
        for s in hole.incoming().flatten() {
            h2.lock().unwrap().push(s);
        }
    });
    let mut ex = live(
        &["--otlp.timeout", "2s", "--otlp.interval", "300ms"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))],
    );
    let (mut before, _) = scrape_for(&ex, Duration::from_millis(1000));
    wait_for("a timed-out export", Duration::from_secs(15), || {
        ex.exports().1 >= 1.0
    });
    let (mut after, last) = scrape_for(&ex, Duration::from_secs(3));
    let (ok, failed) = exports_in(&last);
    assert_eq!(ok, 0.0);
    assert!(failed >= 1.0);
    assert_scrapes_unaffected(&mut before, &mut after);
    assert!(
        !held.lock().unwrap().is_empty(),
        "the exporter never connected"
    );
    assert!(ex.proc.log().contains("timed out"), "{}", ex.proc.log());
    // SIGTERM while an export hangs: one final push bounded by the
    // timeout (2 s), then exit.
    let (st, took) = ex.proc.terminate(Duration::from_secs(8));
    assert!(st.success(), "{st}");
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
    assert!(
        ex.proc
            .log()
            .contains("final OTLP export at shutdown failed"),
        "{}",
        ex.proc.log()
    );
}

/// A minimal HTTP/1.1 server: answers each request with `respond(path)`
/// and keeps each request's head. Stops with the test process.
struct Http1 {
    addr: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Http1 {
    fn start(respond: impl Fn(&str) -> String + Send + 'static) -> Http1 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let h2 = heads.clone();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut b = [0u8; 4096];
                let end = loop {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => break None,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break Some(i);
                    }
                };
                let Some(end) = end else { continue };
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < end + 4 + len {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                }
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                h2.lock().unwrap().push(head);
                let _ = c.write_all(respond(&path).as_bytes());
            }
        });
        Http1 { addr, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn redirect_to(location: &str) -> String {
    format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

const OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Issue 11: a redirect to another origin is not followed, the secret
/// header never reaches it, and the export counts as failed; a redirect
/// within the origin is followed. (The https-to-http downgrade is refused
/// by the same policy: `transport::http` unit tests.)
#[test]
fn otlp_follows_no_redirect_to_another_origin() {
    let elsewhere = Http1::start(|_| OK.to_string());
    let target = format!("http://{}/v1/metrics", elsewhere.addr);
    let collector = Http1::start(move |path| match path {
        "/same" => redirect_to("/ok"),
        "/ok" => OK.to_string(),
        _ => redirect_to(&target),
    });
    let env = |path: &str| {
        vec![
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                format!("http://{}{path}", collector.addr),
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret".to_string()),
        ]
    };
    let ex = simulated(&["--otlp.interval", "300ms"], &env("/v1/metrics"));
    wait_for("two failed exports", Duration::from_secs(20), || {
        ex.exports().1 >= 2.0
    });
    assert_eq!(
        ex.exports().0,
        0.0,
        "a refused redirect counted as a success"
    );
    assert!(
        elsewhere.heads().is_empty(),
        "followed: {:?}",
        elsewhere.heads()
    );
    let log = ex.proc.log();
    assert!(
        log.contains(&format!(
            "refused a redirect to http://{}/v1/metrics: another origin",
            elsewhere.addr
        )),
        "{log}"
    );
    let same = simulated(&["--otlp.interval", "300ms"], &env("/same"));
    wait_for(
        "an export through a same-origin redirect",
        Duration::from_secs(20),
        || same.exports().0 >= 1.0,
    );
    let heads = collector.heads();
    let ok = heads
        .iter()
        .find(|h| h.starts_with("POST /ok "))
        .expect("the redirect was followed");
    let ok = ok.to_ascii_lowercase();
    assert!(ok.contains("x-api-key: s3cret"), "{ok}");
    assert!(ok.contains("content-type: application/x-protobuf"), "{ok}");
    let agent = format!("user-agent: perf-exporter/{}", env!("CARGO_PKG_VERSION"));
    assert!(ok.contains(&agent), "{ok}");
}

/// Issue 11: userinfo and query values of the endpoint appear in no log
/// line (start-up, failure warnings, the final export).
#[test]
fn otlp_endpoint_secrets_never_reach_the_log() {
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut ex = simulated(
        &["--otlp.interval", "300ms", "--otlp.timeout", "1s"],
        &[(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            format!("http://user:pw0rd@127.0.0.1:{closed}/v1/metrics?api_key=s3cret&tenant=hidden-tenant"),
        )],
    );
    wait_for("a logged export failure", Duration::from_secs(20), || {
        ex.proc.log().contains("OTLP export failed")
    });
    let (st, _) = ex.proc.terminate(Duration::from_secs(10));
    assert!(st.success(), "{st}");
    let log = ex.proc.log();
    assert!(
        log.contains("final OTLP export at shutdown failed"),
        "{log}"
    );
    for secret in ["pw0rd", "s3cret", "hidden-tenant", "user:"] {
        assert!(!log.contains(secret), "`{secret}` in the log:\n{log}");
    }
    let redacted =
        format!("http://REDACTED@127.0.0.1:{closed}/v1/metrics?api_key=REDACTED&tenant=REDACTED");
    assert!(log.matches(&redacted).count() >= 3, "{log}");
}

// ----------------------------------------------------------------- TLS

#[test]
fn otlp_grpc_over_tls_with_a_custom_ca_and_a_client_certificate() {
    let pki = Pki::new();
    let tls = tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(
            &pki.server_cert,
            &pki.server_key,
        ))
        .client_ca_root(tonic::transport::Certificate::from_pem(&pki.ca_pem));
    let rx = Receiver::start(Some(tls));
    let port = rx.addr.rsplit(':').next().unwrap().to_string();
    let endpoint = format!("https://localhost:{port}");
    let ex = live(
        &["--otlp.interval", "500ms"],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
            (
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                pki.path("client.pem"),
            ),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key")),
        ],
    );
    wait_for("an export over TLS", Duration::from_secs(20), || {
        !rx.received().is_empty()
    });
    assert!(find_metric(&rx.received()[0].req, "perf.cpu.clock").is_some());
    wait_for("a counted success", Duration::from_secs(10), || {
        ex.exports().0 >= 1.0
    });

    // Without the CA the server is not trusted (the system roots do not
    // know it), and without a client certificate the server refuses.
    for env in [
        vec![
            (
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                pki.path("client.pem"),
            ),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key")),
        ],
        vec![("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem"))],
    ] {
        let mut e = env;
        e.push(("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()));
        e.push(("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()));
        e.push(("OTEL_EXPORTER_OTLP_TIMEOUT", "2000".into()));
        let bad = live(&["--otlp.interval", "300ms"], &e);
        wait_for("a failed TLS export", Duration::from_secs(20), || {
            bad.exports().1 >= 1.0
        });
        assert_eq!(bad.exports().0, 0.0, "{}", bad.proc.log());
        if !e
            .iter()
            .any(|(k, _)| *k == "OTEL_EXPORTER_OTLP_CERTIFICATE")
        {
            let log = bad.proc.log();
            assert!(log.contains("certificate problem"), "{log}");
        }
    }
}

#[test]
fn otlp_http_over_tls_with_a_custom_ca() {
    let pki = Pki::new();
    let vm = Vm::start(&[
        "-tls",
        &format!("-tlsCertFile={}", pki.path("server.pem")),
        &format!("-tlsKeyFile={}", pki.path("server.key")),
    ]);
    let port = vm.addr.rsplit(':').next().unwrap().to_string();
    let ex = live(
        &[
            "--otlp.interval",
            "500ms",
            "--otlp.certificate",
            &pki.path("ca.pem"),
        ],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("https://localhost:{port}/opentelemetry"),
        )],
    );
    wait_for("two exports over TLS", Duration::from_secs(20), || {
        ex.exports().0 >= 2.0
    });
    assert_eq!(ex.exports().1, 0.0);
    // Without the CA: not trusted.
    let bad = live(
        &["--otlp.interval", "300ms", "--otlp.timeout", "2s"],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("https://localhost:{port}/opentelemetry"),
        )],
    );
    wait_for("a failed export", Duration::from_secs(20), || {
        bad.exports().1 >= 1.0
    });
    assert_eq!(bad.exports().0, 0.0);
    // Issue 11: the failure says it is the certificate, and what to do.
    let log = bad.proc.log();
    assert!(
        log.contains(
            "certificate problem: the collector's certificate is not signed by a CA it trusts"
        ) && log.contains("--otlp.certificate"),
        "{log}"
    );
}

// ------------------------------------------------------- configuration

#[test]
fn otlp_configuration_errors_name_their_source() {
    let e = exporter_fails(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    assert!(
        e.contains("OTEL_EXPORTER_OTLP_PROTOCOL: `http/json` is not supported"),
        "{e}"
    );
    let e = exporter_fails(&["--otlp.only"], &[("OTEL_SDK_DISABLED", "true")]);
    assert!(e.contains("OTEL_SDK_DISABLED=true"), "{e}");
    let e = exporter_fails(&["--otlp.only", "--otlp.timeout", "soon"], &[]);
    assert!(
        e.contains("--otlp.timeout: `soon` is not a duration"),
        "{e}"
    );
    let e = exporter_fails(
        &["--otlp.only", "--otlp.certificate", "/nonexistent/ca.pem"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:1")],
    );
    assert!(e.contains("--otlp.certificate /nonexistent/ca.pem"), "{e}");
    // Issue 11: a client key of another certificate says so.
    let pki = Pki::new();
    let (cert, key) = (pki.path("client.pem"), pki.path("server.key"));
    let e = exporter_fails(
        &[
            "--otlp.only",
            "--otlp.client-certificate",
            &cert,
            "--otlp.client-key",
            &key,
        ],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:1")],
    );
    assert!(
        e.contains(&format!(
            "--otlp.client-certificate {cert}: the client key {key} does not belong to this certificate"
        )),
        "{e}"
    );
    let e = exporter_fails(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_HEADERS", "x"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
        ],
    );
    assert!(
        e.contains("OTEL_EXPORTER_OTLP_HEADERS: `x` is not `key=value`"),
        "{e}"
    );
}
