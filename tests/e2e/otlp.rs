//! OTLP push end to end: the real binary counting live software events
//! (root) or on the simulated PMU, pushing to a real VictoriaMetrics 1.112
//! over HTTP/protobuf and to a gRPC receiver of our own that decodes every
//! request: names, units, attributes, the resource, start times across a
//! reload, shutdown and configuration errors. Failures, redirects, secrets
//! and TLS are in `otlp_failures.rs`; the harness is `tests/common/otlp.rs`.
//!
//! VictoriaMetrics comes from `scripts/fetch-servers.sh` (its path in
//! `PERF_EXPORTER_TEST_VICTORIA_METRICS`, as `scripts/test.sh` exports it).
//! A test that cannot get it fails.

use crate::common;

use common::online_cpus;
use common::otlp::{
    exporter_fails, exports_in, find_metric, live, resource_of, simulated, str_attr, sum_by_cpu,
    sum_points, value_of, wait_for, Exporter, Pki, Received, Receiver, Vm,
};
use opentelemetry_proto::tonic::metrics::v1::metric;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

// ------------------------------------------------------- VictoriaMetrics

/// Per-CPU values of a query's series.
fn by_cpu(rows: &[(BTreeMap<String, String>, f64)]) -> BTreeMap<String, f64> {
    rows.iter()
        .map(|(l, v)| (l.get("cpu").cloned().unwrap_or_default(), *v))
        .collect()
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario; to be split into steps (issue 26)
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
    // Per CPU (the default sums software events per node): one series per CPU.
    let dir = tempfile::tempdir().unwrap();
    let per_cpu = common::per_cpu_default_config(dir.path());
    let per_cpu: Vec<&str> = per_cpu.iter().map(String::as_str).collect();
    let ex = live(&per_cpu, &env(&vm, true));
    let ex_plain = live(&per_cpu, &env(&vm_plain, false));

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
        !ex.proc.output().contains("OTLP export failed"),
        "{}",
        ex.proc.output()
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
    // The derived gauges are pushed only (Prometheus computes them with
    // the recording rules of `perf-exporter rules`): their names come back
    // as `perf_derived_<name>` of the config's derived metrics.
    let derived = perf_exporter::config::Config::default_config().derived;
    for n in stored
        .iter()
        .filter_map(|n| n.strip_prefix("perf_derived_"))
    {
        assert!(derived.get(n).is_some(), "perf_derived_{n}: {stored:?}");
    }
    for n in stored.iter().filter(|n| !n.starts_with("perf_derived_")) {
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
    // Per CPU (the default sums software events per node): one point per CPU.
    let dir = tempfile::tempdir().unwrap();
    let per_cpu = common::per_cpu_default_config(dir.path());
    let per_cpu: Vec<&str> = per_cpu.iter().map(String::as_str).collect();
    let ex = live(
        &per_cpu,
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
    // The receiver has the second request before the exporter has its
    // answer and counts it: poll.
    wait_for("two exports counted", Duration::from_secs(20), || {
        ex.exports().0 >= 2.0
    });
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
    let log = ex.proc.output();
    assert!(log.contains("--otlp.only: no HTTP listener"), "{log}");
    assert!(!log.contains("listening"), "{log}");
    assert!(rx.received().is_empty(), "pushed before the first interval");
    let (st, took) = ex.proc.terminate(Duration::from_secs(10));
    assert!(st.success(), "{st}\n{}", ex.proc.output());
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
        .output()
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
    assert!(st.success(), "{st}\n{}", ex.proc.output());
    let got = rx.received();
    assert_eq!(got.len(), 1, "{}", ex.proc.output());
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
    // Named by the flag, whether clap or the resolver refuses it.
    assert!(
        e.contains("--otlp.timeout") && e.contains("`soon` is not a duration"),
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

/// The label names of an exposition's samples.
fn exposed_labels(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| Some(l.split_once('{')?.1.rsplit_once('}')?.0.to_string()))
        .flat_map(|ls| {
            // Values are quoted; names are what precedes each `="`.
            ls.split("\",")
                .filter_map(|kv| kv.split_once("=\"").map(|(k, _)| k.to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A simulated exporter counting `tests/configs/<config>.yaml` on the
/// Kubernetes cgroup fixture, pushing to `rx` over gRPC every `interval`.
fn kubernetes_to(rx: &Receiver, config: &str, interval: &str) -> Exporter {
    kubernetes_at(rx, &common::config_path(config), interval)
}

/// As [`kubernetes_to`], with the config file at `cfg`.
fn kubernetes_at(rx: &Receiver, cfg: &std::path::Path, interval: &str) -> Exporter {
    let cg = common::repo_root().join("tests/fixtures/cgroup/kubernetes-systemd");
    simulated(
        &[
            "--config.file",
            cfg.to_str().unwrap(),
            "--path.cgroupfs",
            cg.to_str().unwrap(),
            "--otlp.protocol",
            "grpc",
            "--otlp.endpoint",
            &format!("http://{}", rx.addr),
            "--otlp.interval",
            interval,
        ],
        &[],
    )
}

/// The simulated exporter with the config text `config` plus sampling by
/// pod (top 2), on the Kubernetes cgroup fixture, pushing to `rx` every
/// 500 ms; the directory holding the config lives as long as the
/// returned guard.
fn pods_pushing(rx: &Receiver, config: &str) -> (Exporter, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(
        &cfg,
        format!("{config}sampling:\n  frequency: 99\n  by: pod\n  top: 2\n"),
    )
    .unwrap();
    let ex = kubernetes_at(rx, &cfg, "500ms");
    (ex, dir)
}

/// Issue 26 item 1: every family a real exposition shows is in the
/// generated reference of metrics (`docs/src/reference/metrics.md`), with
/// every label its series carry. The simulated PMU with the default
/// config, per-pod and per-container counting on the Kubernetes cgroup
/// fixture, sampling by pod and OTLP pushing (so the exporter's own
/// families are all there).
#[test]
fn every_exposed_family_and_label_is_in_the_reference() {
    let rx = Receiver::start(None);
    let default = std::fs::read_to_string(common::repo_root().join("config/default.yaml")).unwrap();
    let (ex, _dir) = pods_pushing(
        &rx,
        &format!("{default}\ncgroups:\n  preset: kubernetes\n  containers: true\n"),
    );
    let mut text = String::new();
    wait_for(
        "a scrape with per-cgroup, sampled and OTLP families",
        Duration::from_secs(30),
        || {
            text = ex.scrape().0;
            [
                "perf_cgroup_cpu_cycles_total{",
                "perf_cgroup_cpu_usage_seconds_total{",
                "perf_sampled_events_total{",
                "perf_ring_lost_records_total{",
                "perf_sampled_tasks_forgotten_total{",
            ]
            .iter()
            .all(|f| text.contains(f))
                && text.lines().any(|l| {
                    l.starts_with("perf_otlp_exports_total{result=\"success\"}")
                        && !l.ends_with(" 0")
                })
        },
    );
    let reference =
        std::fs::read_to_string(common::repo_root().join("docs/src/reference/metrics.md")).unwrap();
    let mut missing = Vec::new();
    let mut families = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            families.insert(rest.split(' ').next().unwrap_or("").to_string());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap_or("");
        let Some(row) = reference
            .lines()
            .find(|r| r.starts_with(&format!("| `{name}` |")))
        else {
            missing.push(format!("family {name}"));
            continue;
        };
        for label in exposed_labels(line) {
            if !row.contains(&format!("`{label}`")) {
                missing.push(format!("label {label} of {name}"));
            }
        }
    }
    for name in &families {
        if !reference.contains(&format!("| `{name}` |")) {
            missing.push(format!("family {name}"));
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        families.len() > 40 && missing.is_empty(),
        "not in docs/src/reference/metrics.md (regenerate: cargo run -- reference --out docs/src/reference): {missing:?}\n{text}"
    );
}

/// Issue 24 item 5: the per-cgroup `pod_uid` label was pushed as
/// `k8s.pod.uid`, stored as `k8s_pod_uid` by Prometheus-compatible stores,
/// so the pod rules and dashboard found nothing on OTLP data. On the
/// simulated PMU with the Kubernetes cgroup fixture and sampling by pod:
/// every data point attribute, translated as those stores do (`.` -> `_`),
/// is a label of `/metrics`, and the pod series carry `pod_uid`.
#[test]
fn otlp_attributes_translate_back_to_the_exposition_labels() {
    let rx = Receiver::start(None);
    let ex = kubernetes_to(&rx, "otlp/k8s_sampling_by_pod", "500ms");
    let has = |r: &Received, name: &str, key: &str| {
        find_metric(&r.req, name).is_some_and(|m| {
            sum_points(m)
                .iter()
                .any(|p| p.attributes.iter().any(|a| a.key == key))
        })
    };
    wait_for(
        "an export with per-pod and sampled-by-pod series",
        Duration::from_secs(30),
        || {
            rx.received().iter().any(|r| {
                has(r, "perf.cgroup.cpu.clock", "pod_uid")
                    && has(r, "perf.cgroup.cpu.clock", "container.id")
                    && has(r, "perf.sampled.events", "pod_uid")
            })
        },
    );
    let labels = exposed_labels(&ex.scrape().0);
    for l in [
        "pod_uid",
        "qos_class",
        "container_id",
        "cgroup",
        "set",
        "cpu",
    ] {
        assert!(labels.contains(l), "{l} not on /metrics: {labels:?}");
    }
    let last = rx.received().pop().unwrap();
    for m in &last.req.resource_metrics[0].scope_metrics[0].metrics {
        let points = match m.data.as_ref() {
            Some(metric::Data::Sum(s)) => &s.data_points,
            Some(metric::Data::Gauge(g)) => &g.data_points,
            _ => continue,
        };
        for a in points.iter().flat_map(|p| &p.attributes) {
            let stored = a.key.replace('.', "_");
            assert!(
                labels.contains(&stored),
                "{}: attribute `{}` is stored as `{stored}`, which /metrics has not: {labels:?}",
                m.name,
                a.key
            );
        }
    }
}

/// Issue 24 item 5, in a real store: VictoriaMetrics with Prometheus
/// naming keeps the per-pod series under `pod_uid` (it stored
/// `k8s_pod_uid` before), so the pod rules' `sum by (..., pod_uid, ...)`
/// and `container_id=""` read OTLP data as they read scraped data.
#[test]
fn otlp_pod_series_keep_pod_uid_in_victoriametrics() {
    let vm = Vm::start(&["-opentelemetry.usePrometheusNaming"]);
    let cfg = common::config_path("otlp/k8s_containers");
    let cg = common::repo_root().join("tests/fixtures/cgroup/kubernetes-systemd");
    let _ex = simulated(
        &[
            "--config.file",
            cfg.to_str().unwrap(),
            "--path.cgroupfs",
            cg.to_str().unwrap(),
            "--otlp.interval",
            "500ms",
        ],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}/opentelemetry", vm.addr),
        )],
    );
    // The fixture's 5 pods, pod-level series only.
    let q = r#"sum by (pod_uid, qos_class) (perf_cgroup_cpu_clock_seconds_total{container_id=""})"#;
    let mut rows = Vec::new();
    wait_for(
        "the 5 pods of the fixture in VictoriaMetrics",
        Duration::from_secs(30),
        || {
            rows = vm.query(q);
            rows.len() == 5
        },
    );
    for (labels, _) in &rows {
        assert_eq!(labels["pod_uid"].len(), 36, "{labels:?}");
        assert!(labels.contains_key("qos_class"), "{labels:?}");
    }
    assert!(
        vm.query(r#"{__name__=~"perf_cgroup_.+", k8s_pod_uid!=""}"#)
            .is_empty(),
        "a series stored with k8s_pod_uid"
    );
    let containers = vm.query(r#"perf_cgroup_cpu_clock_seconds_total{container_id!=""}"#);
    assert!(!containers.is_empty(), "no container series");
}

/// Issue 24 item 1 over OTLP: a reload (SIGHUP, unchanged config) reset
/// the per-cgroup group times, whose value then fell under the old start
/// time (1.704 -> 0.160). Across the reload, no `perf.cgroup.*` series
/// goes down under one start, and the group times keep theirs.
#[test]
fn otlp_per_cgroup_series_never_fall_under_one_start_across_a_reload() {
    let rx = Receiver::start(None);
    let ex = kubernetes_to(&rx, "otlp/k8s", "300ms");
    let enabled = "perf.cgroup.group.enabled";
    // Four exports with group times (over a second of counting): more
    // than the two after the reload can count if they restart.
    wait_for(
        "four exports with group times",
        Duration::from_secs(30),
        || {
            rx.received()
                .iter()
                .filter(|r| find_metric(&r.req, enabled).is_some())
                .count()
                >= 4
        },
    );
    ex.proc.signal("HUP");
    wait_for("the reload", Duration::from_secs(30), || {
        ex.proc.output().contains("configuration reloaded")
    });
    let before = rx.received().len();
    wait_for(
        "two exports after the reload",
        Duration::from_secs(30),
        || rx.received().len() >= before + 2,
    );
    // Per (metric, attributes): the (start, value) of every export.
    let mut series: BTreeMap<(String, String), Vec<(u64, f64)>> = BTreeMap::new();
    for r in rx.received() {
        for m in &r.req.resource_metrics[0].scope_metrics[0].metrics {
            // The counters (the per-cgroup counter states are gauges).
            let sum = matches!(m.data, Some(metric::Data::Sum(_)));
            if !m.name.starts_with("perf.cgroup.") || !sum {
                continue;
            }
            for p in sum_points(m) {
                let attrs = format!("{:?}", p.attributes);
                series
                    .entry((m.name.clone(), attrs))
                    .or_default()
                    .push((p.start_time_unix_nano, value_of(p)));
            }
        }
    }
    assert!(
        series.keys().any(|(n, _)| n == enabled),
        "{:?}",
        series.keys()
    );
    for ((name, attrs), pts) in &series {
        for w in pts.windows(2) {
            assert!(
                w[1].0 != w[0].0 || w[1].1 >= w[0].1,
                "{name} {attrs}: {} -> {} under the same start {}",
                w[0].1,
                w[1].1,
                w[0].0
            );
        }
        if name == enabled {
            let starts: BTreeSet<u64> = pts.iter().map(|p| p.0).collect();
            assert_eq!(
                starts.len(),
                1,
                "{name} {attrs}: the reload moved its start: {pts:?}"
            );
        }
    }
}
